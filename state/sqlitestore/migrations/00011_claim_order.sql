-- +goose Up
-- The claim walks the queued runs in claim order (priority, then
-- available_at, then insertion order) and stops at the first whose pool
-- matches. The index of migration 00001 put runner_pool before the order
-- columns, so every claim sorted every queued run (a temporary B-tree per
-- claim: O(backlog)). PostgreSQL's idx_workflow_runs_claim_pool has this
-- shape already.
DROP INDEX idx_workflow_runs_claim_pool;
CREATE INDEX idx_workflow_runs_claim_order
    ON workflow_runs (priority DESC, available_at)
    WHERE claim_state = 'queued';

-- +goose Down
DROP INDEX idx_workflow_runs_claim_order;
CREATE INDEX idx_workflow_runs_claim_pool
    ON workflow_runs (claim_state, runner_pool, priority DESC, available_at)
    WHERE claim_state = 'queued';
