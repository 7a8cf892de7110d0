package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// Drainer applies mirror_outbox rows to the warm store (SPEC §8): in id
// order, a run's rows by one drainer at a time (state.Outbox.DrainOutbox),
// run rows with the version CAS of warm.Store.PutRun (a late row never
// replaces a newer entry), step rows and session-variable rows as they
// come, event rows into the run's bounded recent-events feed
// (warm.Store.AppendEvents, idempotent by event id; Config.EventsKeep). When the warm store fails, the pass stops; the rows from the
// failing one on stay unapplied and the drainer backs off
// (Config.BackoffMin doubling to BackoffMax) and tries again. Several
// drainers may share one PostgreSQL database.
type Drainer struct {
	ob        state.Outbox
	warm      warm.Store
	cfg       Config
	met       *Metrics
	nudge     chan struct{}
	lastPrune time.Time
}

// NewDrainer returns a drainer of ob into cfg.Warm (cfg with defaults
// applied; met from NewMetrics, or nil for unregistered collectors).
func NewDrainer(ob state.Outbox, cfg Config, met *Metrics) *Drainer {
	cfg = cfg.WithDefaults()
	if met == nil {
		met, _ = NewMetrics(nil)
	}
	return &Drainer{ob: ob, warm: cfg.Warm, cfg: cfg, met: met, nudge: make(chan struct{}, 1)}
}

// Nudge wakes the drainer now (a write committed rows). It never blocks.
func (d *Drainer) Nudge() {
	select {
	case d.nudge <- struct{}{}:
	default:
	}
}

// Run drains until ctx ends: after each pass it waits for a nudge (then
// Config.Coalesce more, so that a burst of writes drains in one pass) or
// Config.PollInterval (no wait when the pass was full), after a failed
// pass the backoff; every Config.PruneInterval it prunes.
func (d *Drainer) Run(ctx context.Context) {
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		n, err := d.DrainOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			backoff = min(max(2*backoff, d.cfg.BackoffMin), d.cfg.BackoffMax)
			d.cfg.Logger.Warn("mirror: drain", "err", err, "retry_in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			continue
		}
		backoff = 0
		if time.Since(d.lastPrune) >= d.cfg.PruneInterval {
			d.lastPrune = time.Now()
			if _, err := d.Prune(ctx); err != nil && ctx.Err() == nil {
				d.cfg.Logger.Warn("mirror: prune outbox", "err", err)
			}
		}
		if n >= d.cfg.BatchSize {
			continue
		}
		t := time.NewTimer(d.cfg.PollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-d.nudge:
			// Let the writes of the next few milliseconds join this pass.
			if !sleep(ctx, d.cfg.Coalesce) {
				t.Stop()
				return
			}
		case <-t.C:
		}
		t.Stop()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// DrainOnce runs one pass: up to Config.BatchSize rows. Returns how many
// rows it marked applied, and the warm store's error when it stopped on
// one (the rows it applied before are marked).
func (d *Drainer) DrainOnce(ctx context.Context) (int, error) {
	n, err := d.ob.DrainOutbox(ctx, &state.DrainOutboxParams{Limit: d.cfg.BatchSize}, d.apply)
	if err != nil {
		d.met.DrainErrors.Inc()
	}
	return n, err
}

// Prune deletes applied rows older than Config.Retention. Returns how many.
func (d *Drainer) Prune(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := d.ob.PruneOutbox(ctx, &state.PruneOutboxParams{OlderThan: d.cfg.Retention})
		total += n
		d.met.Pruned.Add(float64(n))
		if err != nil || n < state.PruneDefaultLimit {
			return total, err
		}
	}
}

// apply is the state.OutboxApplyFunc: rows in order, stopping at the first
// warm failure. Consecutive event rows of one run go to the warm store in
// one AppendEvents call.
func (d *Drainer) apply(ctx context.Context, rows []*state.OutboxRow) ([]int64, error) {
	applied := make([]int64, 0, len(rows))
	for i := 0; i < len(rows); {
		r := rows[i]
		n := 1
		if r.Kind == state.OutboxKindEvent {
			for i+n < len(rows) && rows[i+n].Kind == state.OutboxKindEvent && rows[i+n].RunID == r.RunID {
				n++
			}
		}
		actx, cancel := context.WithTimeout(ctx, d.cfg.ApplyTimeout)
		var err error
		if r.Kind == state.OutboxKindEvent {
			err = d.applyEvents(actx, rows[i:i+n])
		} else {
			err = d.applyRow(actx, r)
		}
		cancel()
		if err != nil {
			return applied, fmt.Errorf("apply outbox row %d (%s of run %s): %w", r.ID, r.Kind, r.RunID, err)
		}
		for _, r := range rows[i : i+n] {
			applied = append(applied, r.ID)
			d.met.Applied.Inc()
			d.met.DrainLag.Observe(max(time.Since(r.CreatedAt).Seconds(), 0))
		}
		i += n
	}
	return applied, nil
}

// applyEvents appends event rows of one run to its warm feed in one call.
// A row that does not decode, or names another run, is logged and skipped;
// a feed the store refuses as malformed (warm.ErrInvalid) is logged and
// skipped whole.
func (d *Drainer) applyEvents(ctx context.Context, rows []*state.OutboxRow) error {
	runID := rows[0].RunID
	evs := make([]*warm.EventEntry, 0, len(rows))
	for _, r := range rows {
		var e warm.EventEntry
		err := json.Unmarshal(r.Payload, &e)
		if err == nil && e.RunID != runID {
			err = fmt.Errorf("event of run %q in a row of run %s", e.RunID, runID)
		}
		if err != nil {
			d.met.Skipped.Inc()
			d.cfg.Logger.Error("mirror: skipping outbox row", "id", r.ID, "kind", r.Kind, "run_id", r.RunID, "err", err)
			continue
		}
		evs = append(evs, &e)
	}
	if len(evs) == 0 {
		return nil
	}
	err := d.warm.AppendEvents(ctx, runID, evs, d.cfg.EventsKeep)
	if errors.Is(err, warm.ErrInvalid) {
		d.met.Skipped.Add(float64(len(evs)))
		d.cfg.Logger.Error("mirror: warm store refused event rows", "first_id", rows[0].ID, "rows", len(rows), "run_id", runID, "err", err)
		return nil
	}
	return err
}

// applyRow applies one row. An undecodable payload or an unknown kind is
// logged and counted as skipped (marked applied: it would fail forever),
// and so is a row the store refuses with warm.ErrInvalid; only the other
// warm-store errors (unreachable, refused) are returned.
func (d *Drainer) applyRow(ctx context.Context, r *state.OutboxRow) error {
	err := d.applyKind(ctx, r)
	if errors.Is(err, warm.ErrInvalid) {
		// The store refused the row as malformed: retrying cannot help.
		d.met.Skipped.Inc()
		d.cfg.Logger.Error("mirror: warm store refused outbox row", "id", r.ID, "kind", r.Kind, "run_id", r.RunID, "err", err)
		return nil
	}
	return err
}

func (d *Drainer) applyKind(ctx context.Context, r *state.OutboxRow) error {
	skip := func(err error) error {
		d.met.Skipped.Inc()
		d.cfg.Logger.Error("mirror: skipping outbox row", "id", r.ID, "kind", r.Kind, "run_id", r.RunID, "err", err)
		return nil
	}
	switch r.Kind {
	case state.OutboxKindRun:
		var row struct {
			warm.RunEntry
			Removed bool `json:"removed"` // a RunRemovedPayload
		}
		if err := json.Unmarshal(r.Payload, &row); err != nil {
			return skip(err)
		}
		if row.Removed {
			return d.warm.DeleteRun(ctx, r.RunID)
		}
		e := row.RunEntry
		e.Version = r.Version
		e.Hash = Hash(&e)
		wrote, err := d.warm.PutRun(ctx, &e, false)
		if err != nil {
			return err
		}
		if !wrote {
			d.met.Stale.Inc()
		}
	case state.OutboxKindStep:
		var s warm.StepEntry
		if err := json.Unmarshal(r.Payload, &s); err != nil {
			return skip(err)
		}
		return d.warm.PutStep(ctx, &s)
	case state.OutboxKindSessionVar:
		var v SessionVarPayload
		if err := json.Unmarshal(r.Payload, &v); err != nil {
			return skip(err)
		}
		val := v.Value
		if v.Deleted {
			val = nil
		} else if len(val) == 0 {
			val = json.RawMessage("null")
		}
		return d.warm.PutSessionVar(ctx, v.WorkspaceID, v.SessionID, v.Key, val)
	case state.OutboxKindEvent:
		return d.applyEvents(ctx, []*state.OutboxRow{r})
	default:
		return skip(fmt.Errorf("unknown kind %q", r.Kind))
	}
	return nil
}
