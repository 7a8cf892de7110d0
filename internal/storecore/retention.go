package storecore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// BlobGraceMin is the shortest blob grace age CollectGarbage applies: a
// writer re-inserting a blob refreshes (and locks) it only when it is
// older than a minute (pgstore's insert_blob), so a grace below that could
// take a blob a checkpoint is about to reference.
const BlobGraceMin = 2 * time.Minute

// errDryRun rolls a dry run's batch back.
var errDryRun = errors.New("storecore: dry run")

// retention is the definitions' override of the ages, by workspace and
// workflow name (0: not overridden).
type retention struct{ succeeded, failed time.Duration }

type wfKey struct{ workspace, name string }

// gcRun is a candidate of the runs phase.
type gcRun struct {
	id, workspace, workflow, status string
	deadLettered                    bool
	ended, now                      time.Time
}

// CollectGarbage implements state.Retention: the runs phase (due runs with
// their descendants and every row keyed by them, the blobs only they
// referenced), then orphan blobs, consumed waits and inbox rows, applied
// outbox rows, expired receipts and, with p.SessionVars, expired session
// variables; each phase in batches of p.Batch, each batch one write.
func (s *Store) CollectGarbage(ctx context.Context, p *state.GCParams) (state.GCReport, error) {
	q := p.WithDefaults()
	q.BlobGrace = max(q.BlobGrace, BlobGraceMin)
	var rep state.GCReport
	over, err := s.retentionOverrides(ctx)
	if err != nil {
		return rep, s.errorf("gc: %w", err)
	}
	phases := []struct {
		name string
		run  func(context.Context, *state.GCParams, map[wfKey]retention, *state.GCReport) error
	}{
		{"runs", s.gcRuns},
		{"orphan blobs", s.gcOrphanBlobs},
		{"consumed waits", s.gcConsumedWaits},
		{"rows", s.gcRows},
	}
	for _, ph := range phases {
		if err := ph.run(ctx, &q, over, &rep); err != nil {
			return rep, s.errorf("gc %s: %w", ph.name, err)
		}
	}
	return rep, nil
}

// gcBatch runs fn as one write whose counts land in rep when it commits
// (or, in a dry run, when it rolls back as it always does then), then
// waits p.Throttle × the time the write took. fn gets a zeroed report each
// time it runs (a write may run again).
func (s *Store) gcBatch(ctx context.Context, p *state.GCParams, hooks bool, rep *state.GCReport, fn func(t *txn, b *state.GCReport) error) error {
	var b state.GCReport
	start := time.Now()
	_, err := s.write(ctx, "CollectGarbage", "", false, func(t *txn) error {
		b = state.GCReport{}
		t.idle = !hooks // without: nothing the warm tier shows goes, no hook runs
		if err := fn(t, &b); err != nil {
			return err
		}
		if p.DryRun {
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return err
	}
	rep.Add(b)
	if p.Throttle > 0 {
		pause := time.NewTimer(time.Duration(p.Throttle * float64(time.Since(start))))
		defer pause.Stop()
		select {
		case <-ctx.Done():
		case <-pause.C:
		}
	}
	return nil
}

// retentionOverrides reads the `retention` field of every workflow's
// current revision (the canonical form: {"succeeded": "<Go duration>",
// "failed": …}).
func (s *Store) retentionOverrides(ctx context.Context) (map[wfKey]retention, error) {
	rows, err := s.reader().Query(ctx, "gc_retention")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[wfKey]retention{}
	for rows.Next() {
		var k wfKey
		var spec []byte
		if err := rows.Scan(&k.workspace, &k.name, &spec); err != nil {
			return nil, err
		}
		var r struct{ Succeeded, Failed string }
		if err := json.Unmarshal(spec, &r); err != nil {
			return nil, fmt.Errorf("workflow %s/%s: retention %s: %w", k.workspace, k.name, spec, err)
		}
		var ret retention
		for _, f := range []struct {
			text string
			to   *time.Duration
		}{{r.Succeeded, &ret.succeeded}, {r.Failed, &ret.failed}} {
			if f.text == "" {
				continue
			}
			if *f.to, err = time.ParseDuration(f.text); err != nil {
				return nil, fmt.Errorf("workflow %s/%s: retention %s: %w", k.workspace, k.name, spec, err)
			}
		}
		out[k] = ret
	}
	return out, rows.Err()
}

// runAge is how long run r stays once it ended (negative: forever).
func runAge(p *state.GCParams, over map[wfKey]retention, r *gcRun) time.Duration {
	o := over[wfKey{r.workspace, r.workflow}]
	switch {
	case r.status == string(starflowtype.RunSucceeded):
		return cmp.Or(o.succeeded, p.Succeeded)
	case r.status == string(starflowtype.RunInterrupted) || r.deadLettered:
		return p.Held
	default: // failed, cancelled
		return cmp.Or(o.failed, p.Failed)
	}
}

// shortestAge is the shortest age of any run (ok false: every run stays
// forever).
func shortestAge(p *state.GCParams, over map[wfKey]retention) (time.Duration, bool) {
	ages := []time.Duration{p.Succeeded, p.Failed, p.Held}
	for _, o := range over {
		ages = append(ages, o.succeeded, o.failed)
	}
	short, ok := time.Duration(0), false
	for _, a := range ages {
		if a > 0 && (!ok || a < short) {
			short, ok = a, true
		}
	}
	return short, ok
}

// gcRuns is the runs phase: a walk of the ended root runs, oldest first,
// from a cursor, so runs that stay are read once per pass.
func (s *Store) gcRuns(ctx context.Context, p *state.GCParams, over map[wfKey]retention, rep *state.GCReport) error {
	short, ok := shortestAge(p, over)
	if !ok {
		return nil
	}
	// With the hooks: the removed runs are the Change's Removed, so the
	// mirror tells the warm tier (a batch that removes none runs none).
	return s.gcLoop(ctx, p, true, rep, gcCursor{time.Unix(0, 0).UTC(), minID}, func(t *txn, b *state.GCReport, c gcCursor) (int, gcCursor, error) {
		t.idle = true
		cands, err := t.gcCandidates(ctx, c.at, c.id, short, p.Batch)
		if err != nil || len(cands) == 0 {
			return 0, c, err
		}
		var due []string
		for _, r := range cands {
			if a := runAge(p, over, r); a > 0 && r.now.Sub(r.ended) > a {
				due = append(due, r.id)
			}
		}
		next := gcCursor{cands[len(cands)-1].ended, cands[len(cands)-1].id}
		ids, err := t.gcWithDescendants(ctx, due)
		if err == nil && len(ids) > 0 {
			err = t.gcDeleteRuns(ctx, ids, p.BlobGrace, b)
			t.ch.Removed, t.idle = ids, false
		}
		return len(cands), next, err
	})
}

// gcCursor is a position in a phase's walk: an instant and an id (the
// blob phase uses the id only).
type gcCursor struct {
	at time.Time
	id string
}

// gcLoop runs batches of one phase until one comes back short: batch gets
// the cursor and returns how many rows it read and the cursor after them.
// The cursor moves only once a batch ended (a write may run its body
// again, from the same cursor). hooks: as gcBatch's.
func (s *Store) gcLoop(ctx context.Context, p *state.GCParams, hooks bool, rep *state.GCReport, c gcCursor,
	batch func(t *txn, b *state.GCReport, c gcCursor) (int, gcCursor, error)) error {
	for ctx.Err() == nil {
		var n int
		var next gcCursor
		err := s.gcBatch(ctx, p, hooks, rep, func(t *txn, b *state.GCReport) error {
			var err error
			n, next, err = batch(t, b, c)
			return err
		})
		if err != nil {
			return err
		}
		if n < p.Batch {
			break
		}
		c = next
	}
	return ctx.Err()
}

func (t *txn) gcCandidates(ctx context.Context, afterAt time.Time, afterID string, short time.Duration, limit int) ([]*gcRun, error) {
	rows, err := t.tx.Query(ctx, "gc_runs", afterAt, afterID, -short, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*gcRun
	for rows.Next() {
		var r gcRun
		if err := rows.Scan(&r.id, &r.workspace, &r.workflow, &r.status, &r.deadLettered, &r.ended, &r.now); err != nil {
			return nil, err
		}
		out = append(out, &r)
	}
	return out, rows.Err()
}

// gcWithDescendants returns the roots whose descendants have all ended,
// with those descendants (locked): a root with a descendant that has not
// ended, or that another transaction holds, stays this time.
func (t *txn) gcWithDescendants(ctx context.Context, roots []string) ([]string, error) {
	if len(roots) == 0 {
		return nil, nil
	}
	rows, err := t.tx.Query(ctx, "gc_tree", roots)
	if err != nil {
		return nil, err
	}
	kids := map[string][]string{}
	keep := map[string]bool{}
	var all []string
	for rows.Next() {
		var root, id, claim string
		if err := rows.Scan(&root, &id, &claim); err != nil {
			rows.Close()
			return nil, err
		}
		kids[root] = append(kids[root], id)
		all = append(all, id)
		if !ended(claim) {
			keep[root] = true
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(all) > 0 {
		locked, err := t.strings(ctx, "gc_lock", all)
		if err != nil {
			return nil, err
		}
		for root, ids := range kids {
			for _, id := range ids {
				if !slices.Contains(locked, id) {
					keep[root] = true
				}
			}
		}
	}
	var out []string
	for _, root := range roots {
		if !keep[root] {
			out = append(out, root)
			out = append(out, kids[root]...)
		}
	}
	return out, nil
}

// ended reports whether a claim_state is one of an ended run (terminal, or
// held for an operator).
func ended(claim string) bool {
	switch starflowtype.ClaimState(claim) {
	case starflowtype.ClaimComplete, starflowtype.ClaimFailed, starflowtype.ClaimAbandoned:
		return true
	}
	return false
}

// gcDeleteRuns removes runs ids (locked) with every row keyed by them, and
// the blobs only they referenced.
func (t *txn) gcDeleteRuns(ctx context.Context, ids []string, grace time.Duration, b *state.GCReport) error {
	blobs, err := t.strings(ctx, "gc_blob_refs", ids)
	if err != nil {
		return err
	}
	for _, err := range []error{
		t.gcDelete(ctx, "gc_delete_steps", ids, &b.Steps),
		t.gcDelete(ctx, "gc_delete_events", ids, &b.Events),
		t.gcDelete(ctx, "gc_delete_checkpoints", ids, &b.Checkpoints),
		t.gcDelete(ctx, "gc_delete_waits", ids, &b.Waits),
		t.gcDelete(ctx, "gc_delete_inbox", ids, &b.InboxRows),
		t.gcDelete(ctx, "gc_delete_jobs", ids, &b.WorkerJobs),
		t.gcDelete(ctx, "gc_delete_receipts", ids, &b.Receipts),
		t.gcDelete(ctx, "gc_delete_runs", ids, &b.Runs),
	} {
		if err != nil {
			return err
		}
	}
	if len(blobs) > 0 {
		n, err := t.tx.Exec(ctx, "gc_blobs_of", blobs, -grace)
		if err != nil {
			return fmt.Errorf("gc_blobs_of: %w", err)
		}
		b.Blobs += n
	}
	return nil
}

// gcDelete runs the delete query of runs ids and adds what it removed to
// count.
func (t *txn) gcDelete(ctx context.Context, query string, ids []string, count *int64) error {
	n, err := t.tx.Exec(ctx, query, ids)
	if err != nil {
		return fmt.Errorf("%s: %w", query, err)
	}
	*count += n
	return nil
}

// gcOrphanBlobs removes the blobs no checkpoint references, untouched for
// the grace age, in sha256 order from a cursor.
func (s *Store) gcOrphanBlobs(ctx context.Context, p *state.GCParams, _ map[wfKey]retention, rep *state.GCReport) error {
	return s.gcLoop(ctx, p, false, rep, gcCursor{}, func(t *txn, b *state.GCReport, c gcCursor) (int, gcCursor, error) {
		sums, err := t.strings(ctx, "gc_orphan_blobs", c.id, -p.BlobGrace, p.Batch)
		b.Blobs = int64(len(sums))
		if len(sums) > 0 {
			c.id = slices.Max(sums)
		}
		return len(sums), c, err
	})
}

// gcConsumedWaits removes consumed waits past p.Consumed that no step
// instance reads any more, from a cursor.
func (s *Store) gcConsumedWaits(ctx context.Context, p *state.GCParams, _ map[wfKey]retention, rep *state.GCReport) error {
	if p.Consumed < 0 {
		return nil
	}
	return s.gcLoop(ctx, p, false, rep, gcCursor{time.Unix(0, 0).UTC(), minID}, func(t *txn, b *state.GCReport, c gcCursor) (int, gcCursor, error) {
		rows, err := t.tx.Query(ctx, "gc_consumed_waits", c.at, c.id, -p.Consumed, p.Batch)
		if err != nil {
			return 0, c, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			var at time.Time
			var id string
			if err := rows.Scan(&at, &id); err != nil {
				return n, c, err
			}
			n++
			if at.After(c.at) || at.Equal(c.at) && id > c.id {
				c = gcCursor{at, id}
			}
		}
		b.Waits = int64(n)
		return n, c, rows.Err()
	})
}

// gcRows removes the kinds that need no cursor — every matching row is
// due: consumed inbox rows, applied outbox rows (the mirror's prune
// query), expired receipts and, with p.SessionVars, expired session
// variables (with the hooks, so the warm tier drops them too).
func (s *Store) gcRows(ctx context.Context, p *state.GCParams, _ map[wfKey]retention, rep *state.GCReport) error {
	var limit int
	kinds := []struct {
		hooks bool
		run   func(t *txn, b *state.GCReport) (int64, error)
	}{
		{false, func(t *txn, b *state.GCReport) (n int64, err error) {
			if p.Consumed < 0 {
				return 0, nil
			}
			n, err = t.tx.Exec(ctx, "gc_consumed_inbox", -p.Consumed, limit)
			b.InboxRows = n
			return n, err
		}},
		{false, func(t *txn, b *state.GCReport) (n int64, err error) {
			n, err = t.pruneOutbox(ctx, p.OutboxApplied, limit)
			b.OutboxRows = n
			return n, err
		}},
		{false, func(t *txn, b *state.GCReport) (n int64, err error) {
			n, err = t.tx.Exec(ctx, "gc_receipts", limit)
			b.Receipts = n
			return n, err
		}},
		{true, func(t *txn, b *state.GCReport) (int64, error) {
			if !p.SessionVars {
				t.idle = true // nothing written: no hook
				return 0, nil
			}
			t.ch.SessionVars = nil
			err := t.removedVars(ctx, "session_gc", limit)
			b.SessionVars = int64(len(t.ch.SessionVars))
			t.idle = b.SessionVars == 0
			return b.SessionVars, err
		}},
	}
	limit = p.Batch
	if p.DryRun {
		// A dry run's batch is rolled back, so the next would count the
		// same rows again: one statement counts them all.
		limit = 1 << 30
	}
	for _, k := range kinds {
		for ctx.Err() == nil {
			var n int64
			err := s.gcBatch(ctx, p, k.hooks, rep, func(t *txn, b *state.GCReport) error {
				var err error
				n, err = k.run(t, b)
				return err
			})
			if err != nil {
				return err
			}
			if n < int64(limit) || p.DryRun {
				break
			}
		}
	}
	return ctx.Err()
}
