-- +goose Up
-- Child-run depth (decision 260).
--
-- workflow_runs.depth: how many workflow_call links separate the run from
-- the root of its tree: 0 for a run without a parent, its parent's depth
-- + 1 for a child. The store writes it when it inserts the run, from the
-- parent's row (insert_run), so a runner checking the cap on nesting
-- (limits.child_depth) reads it from the parent it executes, whatever
-- process started that parent. A run whose parent row is gone counts as
-- 1. Extra column (SPEC appendix A).
ALTER TABLE workflow_runs ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;

-- The runs enqueued before this migration: each tree walked down from its
-- root (a run without a parent, or whose parent is gone).
WITH RECURSIVE chain(id, depth) AS (
    SELECT r.id, CASE WHEN r.parent_run_id IS NULL THEN 0 ELSE 1 END
      FROM workflow_runs r
     WHERE r.parent_run_id IS NULL
        OR NOT EXISTS (SELECT 1 FROM workflow_runs p WHERE p.id = r.parent_run_id)
    UNION ALL
    SELECT c.id, chain.depth + 1
      FROM workflow_runs c JOIN chain ON c.parent_run_id = chain.id)
UPDATE workflow_runs SET depth = chain.depth
  FROM chain
 WHERE chain.id = workflow_runs.id AND chain.depth > 0;

-- +goose Down
ALTER TABLE workflow_runs DROP COLUMN depth;
