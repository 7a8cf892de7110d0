package mirror

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// RunRemovedPayload is the payload of the run outbox row that removes a
// run from the warm tier (its entry, steps, events and progress:
// warm.Store.DeleteRun) once retention deleted it from the cold tier
// (state.Change.Removed). Its version is 0: the run's row, which held
// the version, is gone.
type RunRemovedPayload struct {
	RunID   string `json:"run_id"`
	Removed bool   `json:"removed"`
}

// SessionVarPayload is the payload of a session_var outbox row.
type SessionVarPayload struct {
	WorkspaceID string          `json:"workspace_id"`
	SessionID   string          `json:"session_id"`
	Key         string          `json:"key"`
	Value       json.RawMessage `json:"value,omitempty"`
	Deleted     bool            `json:"deleted,omitempty"`
}

// Hook returns the state.TxHook that appends mirror_outbox rows inside
// every write transaction of a store (SPEC §8), through the store's typed
// outbox operations (state.HookTx). Install it in the store's Config.Hooks
// when opening it (sqlitestore.Config.Hooks, pgstore.Config.Hooks), then
// wrap the store with New. The store's schema must include mirror_outbox
// (Migrate applies it).
//
// For every run a write changed (Change.Run, or Change.Runs for the lease
// sweep) the hook reads the run's current steps (running or waiting in
// its current attempt), projects the run to a warm.RunEntry and, when the
// projection differs from the last one mirrored (workflow_runs.mirror_hash)
// or the write also changed steps, appended events or changed session
// variables of the run, bumps workflow_runs.mirror_version and appends:
// one `step` row per step row the write changed, one `event` row per event
// it appended (payload warm.EventEntry: the event as stored), one `run`
// row (the entry, self-contained), one `session_var` row per session
// variable it set or removed (step and event rows first, then the run row,
// so the run entry lands after its steps and events). Every row of that
// run carries the bumped version. A write that changes nothing the warm
// tier shows (a lease refresh) appends nothing. For the attempts a write
// ended in bulk (Change.Ended: the lease sweep fails their open steps, a
// cancellation cancels them) the hook also sends those failed and
// cancelled steps. For each run a write deleted (Change.Removed: a
// retention batch) it appends a `run` row whose payload is a
// RunRemovedPayload, after the write's other rows. Waits are not
// mirrored (the run's status and current steps show them).
//
// Bumping the version updates the run row, which takes its row lock before
// the rows are inserted, so a run's rows get ids in commit order even with
// concurrent writers on PostgreSQL.
//
// An error (including a missing mirror_outbox table) rolls the write back.
func Hook() state.TxHook {
	return hook
}

// currentStatuses and endedStatuses select a run's current steps and the
// steps a bulk end closed.
var (
	currentStatuses = []starflowtype.StepStatus{starflowtype.StepRunning, starflowtype.StepWaiting}
	endedStatuses   = []starflowtype.StepStatus{starflowtype.StepFailed, starflowtype.StepCancelled}
)

// maxCurrentSteps bounds the current steps a run entry carries.
const maxCurrentSteps = 1000

func hook(ctx context.Context, tx state.HookTx, ch *state.Change) error {
	runs := ch.Runs
	if ch.Run != nil {
		runs = append([]*starflowtype.Run{ch.Run}, runs...)
	}
	if len(runs) == 0 && len(ch.SessionVars) == 0 && len(ch.Removed) == 0 {
		return nil
	}
	stepsOf := map[string][]*starflowtype.Step{}
	for _, s := range ch.Steps {
		stepsOf[s.RunID] = append(stepsOf[s.RunID], s)
	}
	eventsOf := map[string][]*starflowtype.Event{}
	for _, e := range ch.Events {
		eventsOf[e.RunID] = append(eventsOf[e.RunID], e)
	}
	varsOf := map[string][]*starflowtype.SessionVar{}
	for _, v := range ch.SessionVars {
		varsOf[varRun(ch, v)] = append(varsOf[varRun(ch, v)], v)
	}
	ended := map[string][]int{}
	for _, e := range ch.Ended {
		ended[e.RunID] = append(ended[e.RunID], e.Attempt)
	}
	var rows []*state.OutboxRow
	add := func(runID, kind string, payload any, version int64) error {
		b, err := json.Marshal(payload)
		if err != nil {
			return fmt.Errorf("mirror: hook: %s row of run %s: %w", kind, runID, err)
		}
		rows = append(rows, &state.OutboxRow{RunID: runID, Kind: kind, Payload: b, Version: version})
		return nil
	}
	versions := map[string]int64{}
	for _, r := range runs {
		if _, done := versions[r.ID]; done {
			continue
		}
		for _, attempt := range ended[r.ID] {
			more, err := tx.StepsOf(ctx, r.ID, attempt, endedStatuses, 0)
			if err != nil {
				return fmt.Errorf("mirror: hook: ended steps of run %s: %w", r.ID, err)
			}
			for _, s := range more {
				if !slices.ContainsFunc(stepsOf[r.ID], func(h *starflowtype.Step) bool {
					return h.Attempt == s.Attempt && h.ScopePath == s.ScopePath && h.StepID == s.StepID
				}) {
					stepsOf[r.ID] = append(stepsOf[r.ID], s)
				}
			}
		}
		force := len(stepsOf[r.ID]) > 0 || len(eventsOf[r.ID]) > 0 || len(varsOf[r.ID]) > 0
		cur, err := tx.StepsOf(ctx, r.ID, r.Attempt, currentStatuses, maxCurrentSteps)
		if err != nil {
			return fmt.Errorf("mirror: hook: current steps of run %s: %w", r.ID, err)
		}
		current := make([]warm.StepEntry, len(cur))
		for i, s := range cur {
			current[i] = *StepEntry(s)
		}
		e := RunEntry(r, current, 0)
		ph, err := projectionHash(e)
		if err != nil {
			return fmt.Errorf("mirror: hook: run %s: %w", r.ID, err)
		}
		v, bumped, err := tx.BumpMirrorVersion(ctx, r.ID, ph, force)
		if err != nil {
			return fmt.Errorf("mirror: hook: %w", err)
		}
		versions[r.ID] = v
		if !bumped {
			continue // nothing the warm tier shows changed
		}
		e.Version = v
		e.Hash = Hash(e)
		for _, s := range stepsOf[r.ID] {
			if err := add(r.ID, state.OutboxKindStep, StepEntry(s), v); err != nil {
				return err
			}
		}
		for _, ev := range eventsOf[r.ID] {
			if err := add(r.ID, state.OutboxKindEvent, EventEntry(ev), v); err != nil {
				return err
			}
		}
		if err := add(r.ID, state.OutboxKindRun, e, v); err != nil {
			return err
		}
	}
	for _, v := range ch.SessionVars {
		id := varRun(ch, v)
		if err := add(id, state.OutboxKindSessionVar, sessionVarPayload(v), versions[id]); err != nil {
			return err
		}
	}
	for _, id := range ch.Removed {
		if err := add(id, state.OutboxKindRun, &RunRemovedPayload{RunID: id, Removed: true}, 0); err != nil {
			return err
		}
	}
	if err := tx.AppendOutbox(ctx, rows); err != nil {
		return fmt.Errorf("mirror: hook: %w", err)
	}
	return nil
}

// varRun is the run a session variable row belongs to: its origin run, or
// the write's.
func varRun(ch *state.Change, v *starflowtype.SessionVar) string {
	if v.OriginRunID != "" {
		return v.OriginRunID
	}
	return ch.RunID
}

func sessionVarPayload(v *starflowtype.SessionVar) *SessionVarPayload {
	return &SessionVarPayload{WorkspaceID: v.WorkspaceID, SessionID: v.SessionID, Key: v.Key, Value: v.Value, Deleted: v.Value == nil}
}
