package storecore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// PutDefinition implements state.Adapter. The revision's schedules
// replace the workflow's in the same transaction (putSchedules).
func (s *Store) PutDefinition(ctx context.Context, p *state.PutDefinitionParams) (*starflowtype.Definition, error) {
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	_, err := s.write(ctx, state.OpPutDefinition, "", false, func(t *txn) error {
		if _, err := t.tx.Exec(ctx, "insert_definition", uuid.NewString(), ws, p.Name, p.Revision, jsonOr(p.Spec, "null"), p.Source); err != nil {
			return err
		}
		return t.putSchedules(ctx, ws, p)
	})
	if err != nil {
		return nil, s.errorf("put definition %s: %w", p.Name, err)
	}
	return s.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: ws, Name: p.Name, Revision: p.Revision})
}

// errorf prefixes an error with the dialect's name, as every operation's
// error is ("sqlite: claim: …").
func (s *Store) errorf(format string, args ...any) error {
	return fmt.Errorf(s.cfg.Name+": "+format, args...)
}

// EnqueueRun implements state.Adapter. When a run is inserted its pool is
// notified (Dialect.Notify) in the same transaction.
func (s *Store) EnqueueRun(ctx context.Context, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	e, err := newEnqueue(p)
	if err != nil {
		return nil, s.errorf("enqueue %s: %w", p.WorkflowName, err)
	}
	run, err := s.write(ctx, state.OpEnqueueRun, e.id, true, e.write(ctx, p))
	if err != nil {
		return nil, s.errorf("enqueue %s: %w", p.WorkflowName, err)
	}
	return run, nil
}

// EnqueueIn is EnqueueRun inside tx, a transaction the caller commits or
// rolls back (pgstore.Store.EnqueueTx): the hooks run and the notification
// is queued as in EnqueueRun. The run returned is as of tx, not committed.
func (s *Store) EnqueueIn(ctx context.Context, tx Conn, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	e, err := newEnqueue(p)
	if err != nil {
		return nil, s.errorf("enqueue %s: %w", p.WorkflowName, err)
	}
	run, err := s.within(ctx, s.named(tx), state.OpEnqueueRun, e.id, true, e.write(ctx, p))
	if err != nil {
		return nil, s.errorf("enqueue %s: %w", p.WorkflowName, err)
	}
	return run, nil
}

// enqueue is one EnqueueRun's arguments with defaults applied and ids
// checked.
type enqueue struct {
	id, definitionID, parentID string
	maxAttempts                int
	mode                       starflowtype.RecoveryMode
	trigger                    starflowtype.TriggerType
	m                          runMeta
}

func newEnqueue(p *state.EnqueueRunParams) (*enqueue, error) {
	e := &enqueue{
		maxAttempts: p.MaxAttempts, mode: p.RecoveryMode, trigger: p.TriggerType,
		m: runMeta{workspace: orDefault(p.WorkspaceID, state.DefaultWorkspace), env: orDefault(p.Env, state.DefaultEnv), attempt: 1},
	}
	var err error
	if p.ID == "" {
		e.id = uuid.NewString()
	} else if e.id, err = checkID("run id", p.ID); err != nil {
		return nil, err
	}
	if p.DefinitionID != "" {
		if e.definitionID, err = checkID("definition id", p.DefinitionID); err != nil {
			return nil, err
		}
	}
	if p.ParentRunID != "" {
		if e.parentID, err = checkID("parent run id", p.ParentRunID); err != nil {
			return nil, err
		}
	}
	if e.maxAttempts <= 0 {
		e.maxAttempts = state.MaxAttemptsDefault
	}
	if e.mode == "" {
		e.mode = starflowtype.RecoveryReplay
	}
	if e.trigger == "" {
		e.trigger = starflowtype.TriggerAPI
	}
	return e, nil
}

// write is the transaction body of EnqueueRun and EnqueueIn.
func (e *enqueue) write(ctx context.Context, p *state.EnqueueRunParams) func(t *txn) error {
	return func(t *txn) error {
		if p.IdempotencyKey != "" {
			ttl := p.IdempotencyTTL
			if ttl <= 0 {
				ttl = state.IdempotencyTTLDefault
			}
			if _, err := t.tx.Exec(ctx, "upsert_receipt", e.m.workspace, p.IdempotencyKey, e.id, ttl, nullString(p.RequestHash)); err != nil {
				return err
			}
			var holder, hash string
			if err := t.tx.QueryRow(ctx, "receipt_run", e.m.workspace, p.IdempotencyKey).Scan(&holder, &hash); err != nil {
				return err
			}
			if holder != e.id {
				// A duplicate: nothing is written and the first run
				// answers, unless the key answered another request.
				if hash != "" && p.RequestHash != "" && hash != p.RequestHash {
					return fmt.Errorf("idempotency key %q was used with a different request (run %s): %w",
						p.IdempotencyKey, holder, starflowtype.ErrConflict)
				}
				t.ch.RunID = holder
				t.idle = true
				return nil
			}
		}
		run, err := t.runWithEvent(ctx, "insert_run", []any{e.id, e.m.workspace, e.m.env, nullString(e.definitionID),
			p.WorkflowName, p.WorkflowRevision, p.WorkflowName, nullString(p.RunnerPool), p.Priority,
			e.maxAttempts, p.Delay, string(e.mode), string(e.trigger), nullString(e.parentID),
			nullString(p.IdempotencyKey), jsonNull(p.Input), nullString(p.TraceID), nullString(p.TraceParent)},
			nil, EventIn{Type: starflowtype.EventRunQueued, Payload: p.QueuedPayload})
		if err != nil {
			return err
		}
		t.ch.Run = run
		t.notify = append(t.notify, p.RunnerPool)
		return nil
	}
}

// runWithEvent runs query, a write of one run's row returning its
// run_columns (then the columns of more), and appends ev, an event of the
// run's: in the same statement where the dialect has query + "_event"
// (PostgreSQL; it takes ev's type and payload after query's arguments and
// returns the event's id and created_at last), else by insert_event after
// it. ErrNoRows when the query wrote no row (nor the event).
func (t *txn) runWithEvent(ctx context.Context, query string, args, more []any, ev EventIn) (*starflowtype.Run, error) {
	if t.s.queries[query+"_event"] != "" {
		e := &starflowtype.Event{Type: ev.Type, Payload: ev.Payload}
		r, err := scanRun(t.tx.QueryRow(ctx, query+"_event", append(args, string(ev.Type), ev.Payload)...), append(more, &e.ID, &e.CreatedAt)...)
		if err != nil {
			return nil, err
		}
		e.RunID, e.Attempt = r.ID, r.Attempt
		t.ch.Events = append(t.ch.Events, e)
		return r, nil
	}
	r, err := scanRun(t.tx.QueryRow(ctx, query, args...), more...)
	if err != nil {
		return nil, err
	}
	m := runMeta{id: r.ID, workspace: r.WorkspaceID, env: r.Env, attempt: r.Attempt}
	return r, t.event(ctx, m, r.ID, 0, ev.Type, "", "", ev.Payload)
}

// jsonNull is b, or NULL when empty.
func jsonNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// ClaimRun implements state.Adapter: ClaimRuns of one run.
func (s *Store) ClaimRun(ctx context.Context, p *state.ClaimRunParams) (*starflowtype.Run, error) {
	q := *p
	q.Limit = 1
	runs, err := s.ClaimRuns(ctx, &q)
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	return runs[0], nil
}

// ClaimRuns implements state.Adapter: one conditional UPDATE of the best
// claimable runs (PostgreSQL: its subquery locks them FOR UPDATE SKIP
// LOCKED) and their run_claimed events, in one transaction. With p.Start
// each run is also started, as OnRunStart would, with its run_started
// (run_resumed) event: in the claim's own statement where the dialect has
// its *_start form (PostgreSQL: one new row version a run, not two, and
// the events inserted by the same statement), else by run_start after it
// and one statement for the two events.
func (s *Store) ClaimRuns(ctx context.Context, p *state.ClaimRunParams) ([]*starflowtype.Run, error) {
	var out []*starflowtype.Run
	_, err := s.write(ctx, state.OpClaimRun, "", false, func(t *txn) error {
		out = nil
		query, args := "claim_run", ClaimArgs(p, max(p.Limit, 1))
		if p.RunID != "" {
			id, ok := CanonicalID(p.RunID)
			if !ok {
				t.idle = true
				return nil
			}
			query, args = "claim_run_id", append(args[:4], id)
			if p.WithDescendants {
				query = "claim_run_family"
			}
		}
		started := p.Start && s.queries[query+"_start"] != ""
		if started {
			query = query + "_start" // PostgreSQL's (queries_test.go: pgOnly)
			args = append(args, ClaimStartArg(p))
		}
		rows, err := t.tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		var events []*starflowtype.Event // written by a _start statement
		for rows.Next() {
			var before string
			var ids []int64
			var at time.Time
			var payloads []string
			var more []any
			if started {
				more = []any{&before, &ids, &at, &payloads}
			}
			r, err := scanRun(rows, more...)
			if err != nil {
				rows.Close()
				return err
			}
			out = append(out, r)
			if started {
				m := runMeta{id: r.ID, attempt: r.Attempt, status: before}
				for i, typ := range []starflowtype.EventType{starflowtype.EventRunClaimed, startEvent(m, r.Lease()).Type} {
					if i < len(ids) && i < len(payloads) {
						events = append(events, &starflowtype.Event{ID: ids[i], RunID: r.ID, Attempt: r.Attempt,
							Type: typ, Payload: json.RawMessage(payloads[i]), CreatedAt: at})
					}
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(out) == 0 {
			t.idle = true
			return nil
		}
		// Claim order: the statement's RETURNING keeps none.
		slices.SortStableFunc(out, func(a, b *starflowtype.Run) int {
			return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.AvailableAt.Compare(b.AvailableAt), a.CreatedAt.Compare(b.CreatedAt))
		})
		// The events in the order they were written (ids).
		slices.SortFunc(events, func(a, b *starflowtype.Event) int { return cmp.Compare(a.ID, b.ID) })
		t.ch.Events = append(t.ch.Events, events...)
		for i, r := range out {
			if started {
				continue
			}
			// The claim left the status as it was: the one before.
			m := runMeta{id: r.ID, workspace: r.WorkspaceID, env: r.Env, attempt: r.Attempt, status: string(r.Status)}
			claimed := claimedEvent(r)
			if !p.Start {
				if err := t.event(ctx, m, r.ID, 0, claimed.Type, "", "", claimed.Payload); err != nil {
					return err
				}
				continue
			}
			if out[i], err = scanRun(t.tx.QueryRow(ctx, "run_start", m.id)); err != nil {
				return err
			}
			if err := t.eventPair(ctx, m, claimed, startEvent(m, r.Lease())); err != nil {
				return err
			}
		}
		if len(out) == 1 {
			t.ch.RunID, t.ch.Run = out[0].ID, out[0]
		} else {
			t.ch.Runs = out
		}
		return nil
	})
	if err != nil {
		return nil, s.errorf("claim: %w", err)
	}
	// The callers' copies: hooks keep theirs.
	for i, r := range out {
		c := *r
		out[i] = &c
	}
	return out, nil
}

// ClaimStartArg is the argument a claim_run*_start query takes after the
// claim's: the runner id as a JSON string, for the events' payloads.
func ClaimStartArg(p *state.ClaimRunParams) string { return string(marshal(p.RunnerID)) }

// ClaimArgs are the arguments of the claim_run query for p and limit
// (pgstore's plan tests explain the same, ExplainClaim).
func ClaimArgs(p *state.ClaimRunParams, limit int) []any {
	return []any{p.RunnerID, p.LeaseTTL, orEmpty(p.Pools), p.WorkspaceID, limit}
}

// OnRunStart implements state.Adapter.
func (s *Store) OnRunStart(ctx context.Context, p *state.RunStartParams) (*starflowtype.Run, error) {
	run, err := s.write(ctx, state.OpRunStart, p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		t.ch.Run, err = t.startRun(ctx, m, p.Lease)
		return err
	})
	if err != nil {
		return nil, s.errorf("run start: %w", err)
	}
	return run, nil
}

// startRun writes the start of fenced run m: status running and a
// run_started event, or run_resumed for a run woken from a pause (it
// continues its attempt).
func (t *txn) startRun(ctx context.Context, m runMeta, l starflowtype.Lease) (*starflowtype.Run, error) {
	r, err := scanRun(t.tx.QueryRow(ctx, "run_start", m.id))
	if err != nil {
		return nil, err
	}
	e := startEvent(m, l)
	return r, t.event(ctx, m, m.id, 0, e.Type, "", "", e.Payload)
}

// startEvent is the event of run m's start under lease l.
func startEvent(m runMeta, l starflowtype.Lease) EventIn {
	typ := starflowtype.EventRunStarted
	if m.status == string(starflowtype.RunPaused) {
		typ = starflowtype.EventRunResumed
	}
	return EventIn{Type: typ, Payload: leasePayload(l)}
}

// claimedEvent is the run_claimed event of claimed run r.
func claimedEvent(r *starflowtype.Run) EventIn {
	return EventIn{Type: starflowtype.EventRunClaimed, Payload: leasePayload(r.Lease())}
}

// leasePayload is the payload of the events of a claim and a start.
func leasePayload(l starflowtype.Lease) json.RawMessage {
	return marshal(map[string]any{"runner_id": l.RunnerID, "lease_epoch": l.Epoch})
}

// RefreshLease implements state.Adapter.
func (s *Store) RefreshLease(ctx context.Context, p *state.RefreshLeaseParams) (time.Time, error) {
	var until time.Time
	_, err := s.write(ctx, state.OpRefreshLease, p.RunID, false, func(t *txn) error {
		id, ok := CanonicalID(p.RunID)
		if !ok {
			return lost(p.RunID, p.Lease)
		}
		err := t.tx.QueryRow(ctx, "refresh_lease", p.LeaseTTL, id, p.Lease.RunnerID, p.Lease.Epoch).Scan(&until)
		if isNoRows(err) {
			return lost(p.RunID, p.Lease)
		}
		return err
	})
	if err != nil {
		return time.Time{}, s.errorf("refresh lease: %w", err)
	}
	return until, nil
}

// RecordPhaseIfChanged implements state.Adapter.
func (s *Store) RecordPhaseIfChanged(ctx context.Context, p *state.RecordPhaseParams) error {
	_, err := s.write(ctx, state.OpRecordPhase, p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		return t.setPhase(ctx, m, m.id, p.Phase)
	})
	if err != nil {
		return s.errorf("record phase: %w", err)
	}
	return nil
}

// setPhase sets the run's phase and appends a phase event when it changed.
func (t *txn) setPhase(ctx context.Context, m runMeta, runID, phase string) error {
	n, err := t.tx.Exec(ctx, "set_phase", phase, runID)
	if err != nil || n == 0 {
		return err
	}
	return t.event(ctx, m, runID, 0, starflowtype.EventPhase, "", "", marshal(map[string]any{"phase": phase}))
}

// OnRunComplete implements state.Adapter. Its fence is the ending UPDATE
// itself (conditional on the lease, RETURNING the run as written): one
// statement for the run and its event (runWithEvent), then the run's end.
func (s *Store) OnRunComplete(ctx context.Context, p *state.RunCompleteParams) (*starflowtype.Run, error) {
	run, err := s.write(ctx, state.OpRunComplete, p.RunID, true, func(t *txn) error {
		id, ok := CanonicalID(p.RunID)
		if !ok {
			return lost(p.RunID, p.Lease)
		}
		var work int
		r, err := t.runWithEvent(ctx, "run_succeeded", []any{jsonOr(p.Output, "null"), id, p.Lease.RunnerID, p.Lease.Epoch},
			[]any{&work}, EventIn{Type: starflowtype.EventRunSucceeded})
		if isNoRows(err) {
			return lost(p.RunID, p.Lease)
		}
		if err != nil {
			return err
		}
		t.ch.RunID, t.ch.Run = id, r
		return t.ended(ctx, id, r.ParentRunID, string(r.Status), jsonOr(r.Output, "null"), r.Error, r.ErrorDetail, work)
	})
	if err != nil {
		return nil, s.errorf("run complete: %w", err)
	}
	return run, nil
}

// OnRunError implements state.Adapter. A re-queued run's pool is notified.
// Each end writes p.Error and p.ErrorJSON together (error, error_json).
func (s *Store) OnRunError(ctx context.Context, p *state.RunErrorParams) (*starflowtype.Run, error) {
	detail, err := errorJSON(p.ErrorJSON)
	if err != nil {
		return nil, s.errorf("run error: %w", err)
	}
	run, err := s.write(ctx, state.OpRunError, p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		attempt, maxAttempts, mode, pool := m.attempt, m.maxAttempts, m.mode, m.pool
		switch {
		case p.Retry && starflowtype.RecoveryMode(mode) == starflowtype.RecoveryManual:
			if err := t.endAttempt(ctx, m.id, attempt); err != nil {
				return err
			}
			if _, err := t.tx.Exec(ctx, "run_hold", p.Error, m.id, detail); err != nil {
				return err
			}
			payload := marshal(map[string]any{"error": p.Error, "recovery_mode": mode})
			return t.event(ctx, m, m.id, 0, starflowtype.EventRunInterrupted, "", "", payload)
		case p.Retry && attempt < maxAttempts:
			if err := t.endAttempt(ctx, m.id, attempt); err != nil {
				return err
			}
			if _, err := t.tx.Exec(ctx, "run_requeue", p.Backoff, p.Error, m.id, detail); err != nil {
				return err
			}
			t.notify = append(t.notify, pool)
			payload := marshal(map[string]any{"error": p.Error, "next_attempt": attempt + 1, "backoff_ms": p.Backoff.Milliseconds()})
			return t.event(ctx, m, m.id, 0, starflowtype.EventRunInterrupted, "", "", payload)
		default:
			dead := p.Retry // retryable, but attempts ran out
			if _, err := t.tx.Exec(ctx, "run_failed", p.Error, dead, m.id, detail); err != nil {
				return err
			}
			if err := t.event(ctx, m, m.id, 0, starflowtype.EventRunFailed, "", "", marshal(map[string]any{"error": p.Error})); err != nil {
				return err
			}
			if dead {
				if err := t.event(ctx, m, m.id, 0, starflowtype.EventRunDeadLettered, "", "", nil); err != nil {
					return err
				}
			}
			return t.endRun(ctx, m.id)
		}
	})
	if err != nil {
		return nil, s.errorf("run error: %w", err)
	}
	return run, nil
}

// errorJSON is a typed error object as the error_json argument: nil
// (NULL) when b holds none (empty or JSON null), its text otherwise; an
// error when it is not a JSON object (SQLite would store any text).
func errorJSON(b json.RawMessage) (any, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	if t[0] != '{' || !json.Valid(t) {
		return nil, fmt.Errorf("error_json %.40q is not a JSON object", t)
	}
	return string(t), nil
}

// OnRunCancelled implements state.Adapter.
func (s *Store) OnRunCancelled(ctx context.Context, p *state.RunCancelledParams) (*starflowtype.Run, error) {
	run, err := s.write(ctx, state.OpRunCancelled, p.RunID, true, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		if err := t.cancelRun(ctx, m, m.id, nil); err != nil {
			return err
		}
		return t.cancelChildren(ctx, m.id) // started after CancelRun cascaded
	})
	if err != nil {
		return nil, s.errorf("run cancelled: %w", err)
	}
	return run, nil
}

// ClearLease implements state.Adapter: its fence is the releasing UPDATE
// itself (conditional on the lease). The released run's pool is notified.
func (s *Store) ClearLease(ctx context.Context, p *state.ClearLeaseParams) error {
	_, err := s.write(ctx, state.OpClearLease, p.RunID, false, func(t *txn) error {
		m := runMeta{}
		var ok bool
		if m.id, ok = CanonicalID(p.RunID); !ok {
			return lost(p.RunID, p.Lease)
		}
		var pool string
		err := t.tx.QueryRow(ctx, "clear_lease", m.id, p.Lease.RunnerID, p.Lease.Epoch).Scan(&m.workspace, &m.env, &m.attempt, &pool)
		if isNoRows(err) {
			return lost(p.RunID, p.Lease)
		}
		if err != nil {
			return err
		}
		t.ch.RunID = m.id
		t.notify = append(t.notify, pool)
		payload := marshal(map[string]any{"reason": "lease_released", "runner_id": p.Lease.RunnerID})
		return t.event(ctx, m, m.id, 0, starflowtype.EventRunQueued, "", "", payload)
	})
	if err != nil {
		return s.errorf("clear lease: %w", err)
	}
	return nil
}
