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
    workspace_id   text        NOT NULL,
    workflow_name  text        NOT NULL,
    schedule_index integer     NOT NULL,
    env            text        NOT NULL,
    definition_id  uuid        REFERENCES workflow_definitions (id),
    revision       text        NOT NULL,
    cron           text        NOT NULL,
    timezone       text        NOT NULL,
    overlap        text        NOT NULL CHECK (overlap IN ('skip', 'allow', 'cancel_previous')),
    catchup        text        NOT NULL CHECK (catchup IN ('none', 'last', 'all')),
    input_json     json        NOT NULL,
    anchor_at      timestamptz NOT NULL DEFAULT now(),
    last_tick_at   timestamptz,
    next_fire_at   timestamptz,
    last_run_id    uuid,
    version        bigint      NOT NULL DEFAULT 1,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, workflow_name, schedule_index)
);

-- The scheduler reads the due rows in next-fire order.
CREATE INDEX idx_workflow_schedules_next_fire ON workflow_schedules (next_fire_at);

-- workflow_schedule_pauses: a workflow whose schedules are paused (per
-- workflow: it outlives new revisions, and covers a revision applied
-- while paused). A resume deletes the row.
CREATE TABLE workflow_schedule_pauses (
    workspace_id  text        NOT NULL,
    workflow_name text        NOT NULL,
    paused_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (workspace_id, workflow_name)
);

-- +goose Down
DROP TABLE workflow_schedule_pauses;
DROP TABLE workflow_schedules;
