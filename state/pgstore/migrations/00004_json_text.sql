-- +goose Up
-- JSON columns keep their text exactly (json, not jsonb). jsonb normalises
-- numbers — 1e+06 and 1000000.0 become 1000000 — which changes a value's
-- CEL type (double → int) when a checkpoint, input or output is read back,
-- and it refuses strings holding \u0000. Starflow never queries inside
-- these columns, so nothing is lost. (spec_json was json from the start.)
ALTER TABLE workflow_runs
    ALTER COLUMN input_json      TYPE json USING input_json::text::json,
    ALTER COLUMN output_json     TYPE json USING output_json::text::json,
    ALTER COLUMN checkpoint_json TYPE json USING checkpoint_json::text::json;
ALTER TABLE workflow_run_events
    ALTER COLUMN payload_json TYPE json USING payload_json::text::json;
ALTER TABLE workflow_run_checkpoints
    ALTER COLUMN context_json TYPE json USING context_json::text::json,
    ALTER COLUMN outputs_json TYPE json USING outputs_json::text::json;

-- +goose Down
ALTER TABLE workflow_runs
    ALTER COLUMN input_json      TYPE jsonb USING input_json::jsonb,
    ALTER COLUMN output_json     TYPE jsonb USING output_json::jsonb,
    ALTER COLUMN checkpoint_json TYPE jsonb USING checkpoint_json::jsonb;
ALTER TABLE workflow_run_events
    ALTER COLUMN payload_json TYPE jsonb USING payload_json::jsonb;
ALTER TABLE workflow_run_checkpoints
    ALTER COLUMN context_json TYPE jsonb USING context_json::jsonb,
    ALTER COLUMN outputs_json TYPE jsonb USING outputs_json::jsonb;
