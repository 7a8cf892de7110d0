-- +goose Up
-- What a run's end has to clean up (issue 11): bit 1, it wrote session
-- variables (dropped at its end unless kept); bit 2, it registered waits
-- (cancelled at its end). A run that did neither ends without the two
-- statements. Runs that have not ended yet may have done either.
ALTER TABLE workflow_runs ADD COLUMN end_work INTEGER NOT NULL DEFAULT 0;
UPDATE workflow_runs SET end_work = 3 WHERE status NOT IN ('succeeded', 'failed', 'cancelled');

-- +goose Down
ALTER TABLE workflow_runs DROP COLUMN end_work;
