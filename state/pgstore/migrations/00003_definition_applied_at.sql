-- +goose Up
-- applied_at: when the revision was last applied. Re-applying an older
-- revision makes it the newest again ("current"), as a deploy would.
ALTER TABLE workflow_definitions ADD COLUMN applied_at timestamptz;
UPDATE workflow_definitions SET applied_at = created_at;
ALTER TABLE workflow_definitions ALTER COLUMN applied_at SET DEFAULT now();
ALTER TABLE workflow_definitions ALTER COLUMN applied_at SET NOT NULL;
CREATE INDEX idx_workflow_definitions_current ON workflow_definitions (workspace_id, name, applied_at DESC, seq DESC);

-- +goose Down
DROP INDEX idx_workflow_definitions_current;
ALTER TABLE workflow_definitions DROP COLUMN applied_at;
