package starflowtype

import (
	"encoding/json"
	"time"
)

// Schedule is the stored state of one schedule of a workflow (a
// definition's schedules entry, issue 15): what it came from, what it
// starts, and how far it got. Times are the database's, UTC; a zero time
// is "none".
type Schedule struct {
	WorkspaceID string `json:"workspace_id"`
	// Env is the env of the runs it starts: the env of whoever applied
	// the revision.
	Env      string `json:"env"`
	Workflow string `json:"workflow"`
	// Index is the schedule's position in the definition's schedules
	// list (from 0).
	Index int `json:"index"`
	// Revision and DefinitionID name the definition revision the schedule
	// came from; its runs are pinned to it.
	Revision     string `json:"revision"`
	DefinitionID string `json:"definition_id"`
	Cron         string `json:"cron"`
	Timezone     string `json:"timezone"` // IANA zone, "UTC" by default
	Overlap      string `json:"overlap"`  // skip | allow | cancel_previous
	Catchup      string `json:"catchup"`  // none | last | all
	// Input is each run's input as written in the schedule (the input
	// schema's defaults are applied at each enqueue).
	Input json.RawMessage `json:"input"`
	// Paused: the workflow's schedules are paused (per workflow; it
	// outlives new revisions).
	Paused bool `json:"paused"`
	// AnchorAt is when the schedule's state began (its revision applied,
	// or the workflow resumed): only ticks after it and after LastTickAt
	// are due.
	AnchorAt time.Time `json:"anchor_at"`
	// LastTickAt is the newest tick handled: fired, skipped by overlap
	// or by catchup.
	LastTickAt time.Time `json:"last_tick_at,omitzero"`
	// NextFireAt is the next tick as the scheduler last computed it; zero
	// until its first pass after AnchorAt.
	NextFireAt time.Time `json:"next_fire_at,omitzero"`
	// LastRunID is the run the schedule started last, "" when none.
	LastRunID string `json:"last_run_id,omitempty"`
	// Version counts the schedule's state changes: every scheduler write
	// is conditioned on it.
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}
