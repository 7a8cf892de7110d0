-- +goose Up
-- Workflow schedules (issue 15).
--
-- workflow_schedules: one row per schedule of a workflow's current
-- revision (its index in the definition's schedules list), replaced in
-- PutDefinition's transaction when a revision becomes current. env is the
-- env of the runs it starts (the applier's). cron, timezone, overlap,
-- catchup and input_json are the schedule as applied (defaults filled in).
-- anchor_at: when the row's state began (applied, or resumed): only ticks
-- after it and after last_tick_at (the newest tick handled: fired or
-- skipped) are due. next_fire_at: the next tick as the scheduler computed
-- it, NULL until its first pass over the row. last_run_id: the run it
-- started last. version: bumped by every write; the scheduler's write
-- (FireSchedule) is conditioned on it, so each tick is handled once across
-- every process.
CREATE TABLE workflow_schedules (
    workspace_id   TEXT        NOT NULL,
    workflow_name  TEXT        NOT NULL,
    schedule_index INTEGER     NOT NULL,
    env            TEXT        NOT NULL,
    definition_id  TEXT        REFERENCES workflow_definitions (id),
    revision       TEXT        NOT NULL,
    cron           TEXT        NOT NULL,
    timezone       TEXT        NOT NULL,
    overlap        TEXT        NOT NULL CHECK (overlap IN ('skip', 'allow', 'cancel_previous')),
    catchup        TEXT        NOT NULL CHECK (catchup IN ('none', 'last', 'all')),
    input_json     TEXT        NOT NULL,
    anchor_at      TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    last_tick_at   TEXT,
    next_fire_at   TEXT,
    last_run_id    TEXT,
    version        INTEGER     NOT NULL DEFAULT 1,
    created_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    updated_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    PRIMARY KEY (workspace_id, workflow_name, schedule_index)
);

-- The scheduler reads the due rows in next-fire order.
CREATE INDEX idx_workflow_schedules_next_fire ON workflow_schedules (next_fire_at);

-- workflow_schedule_pauses: a workflow whose schedules are paused (per
-- workflow: it outlives new revisions, and covers a revision applied
-- while paused). A resume deletes the row.
CREATE TABLE workflow_schedule_pauses (
    workspace_id  TEXT        NOT NULL,
    workflow_name TEXT        NOT NULL,
    paused_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
    PRIMARY KEY (workspace_id, workflow_name)
);

-- +goose Down
DROP TABLE workflow_schedule_pauses;
DROP TABLE workflow_schedules;
