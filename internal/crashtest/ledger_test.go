package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// sideEffectWorkflow is a workflow of n service_call steps s01…sNN, each a
// POST of a small JSON body to url carrying the worker's name; delays
// gives some steps a service-side processing time (ms).
func sideEffectWorkflow(name, url string, n int, delays map[string]int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `name: %s
max_attempts: 5
defaults:
  timeout: 10s
  retry_policy: {max_attempts: 3, initial_interval: 100ms, backoff: 2.0, max_interval: 1s}
steps:
`, name)
	for i := 1; i <= n; i++ {
		id := stepID(i)
		fmt.Fprintf(&b, `  - id: %s
    service_call:
      method: POST
      url: %q
      headers:
        %s: "${{ env.%s }}"
      body: {step: %s, n: "${{ input.n }}", delay_ms: %d}
`, id, url, workerHeader, workerEnv, id, delays[id])
	}
	return b.String()
}

func stepID(i int) string { return fmt.Sprintf("s%02d", i) }

// runRow is one run with its final attempt's ledger counts.
type runRow struct {
	id, status string
	attempt    int
	epoch      int64
	// Of the final attempt: checkpoints, step rows, succeeded step rows.
	checkpoints, steps, succeeded int
}

// runs reads every run of the schema, by id.
func (c *cluster) runs() map[string]*runRow {
	c.t.Helper()
	rows, err := c.pool().Query(context.Background(), `
		SELECT r.id::text, r.status, r.attempt, r.lease_epoch,
		       (SELECT count(*) FROM workflow_run_checkpoints k WHERE k.run_id = r.id AND k.attempt = r.attempt),
		       (SELECT count(*) FROM workflow_steps s WHERE s.run_id = r.id AND s.attempt = r.attempt),
		       (SELECT count(*) FROM workflow_steps s WHERE s.run_id = r.id AND s.attempt = r.attempt AND s.status = 'succeeded')
		  FROM workflow_runs r`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]*runRow{}
	for rows.Next() {
		r := &runRow{}
		if err := rows.Scan(&r.id, &r.status, &r.attempt, &r.epoch, &r.checkpoints, &r.steps, &r.succeeded); err != nil {
			c.t.Fatal(err)
		}
		out[r.id] = r
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// statusCounts is "status: n" for every run status present, for messages.
func (c *cluster) statusCounts() string {
	rows, err := c.pool().Query(context.Background(),
		`SELECT status || '/' || claim_state || ': ' || count(*) FROM workflow_runs GROUP BY status, claim_state ORDER BY 1`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var s string
		if rows.Scan(&s) == nil {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ", ")
}

// waitAllSucceeded waits until n runs have succeeded, failing early when
// one ends otherwise.
func (c *cluster) waitAllSucceeded(n int, timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, timeout, fmt.Sprintf("%d runs to succeed", n), func() bool {
		if bad := c.count(`SELECT count(*) FROM workflow_runs WHERE status IN ('failed', 'cancelled')`); bad > 0 {
			c.t.Fatalf("%d runs ended failed or cancelled: %s", bad, c.statusCounts())
		}
		return c.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`) == n
	})
}

// checkLedger checks that every run succeeded and the ledger invariant of
// its final attempt: checkpoints == succeeded steps == step rows == steps.
func (c *cluster) checkLedger(runs map[string]*runRow, want, steps int) {
	c.t.Helper()
	if len(runs) != want {
		c.t.Errorf("%d runs in the store, want %d", len(runs), want)
	}
	for _, r := range runs {
		if r.status != string(starflowtype.RunSucceeded) {
			c.t.Errorf("run %s ended %s", r.id, r.status)
		}
		if r.checkpoints != steps || r.succeeded != steps || r.steps != steps {
			c.t.Errorf("run %s attempt %d: %d checkpoints, %d succeeded steps, %d step rows; want %d of each",
				r.id, r.attempt, r.checkpoints, r.succeeded, r.steps, steps)
		}
	}
}

// event is one row of workflow_run_events with the payload fields the
// checks read.
type event struct {
	id      int64
	typ     starflowtype.EventType
	attempt int
	at      time.Time
	payload struct {
		RunnerID   string `json:"runner_id"`
		LeaseEpoch int64  `json:"lease_epoch"`
		Reason     string `json:"reason"`
	}
}

// events reads every event of the schema, per run in id order (the commit
// order of one run's writes: each of them locks the run's row).
func (c *cluster) events() map[string][]event {
	c.t.Helper()
	rows, err := c.pool().Query(context.Background(),
		`SELECT run_id::text, id, event_type, attempt, created_at, coalesce(payload_json, 'null') FROM workflow_run_events ORDER BY run_id, id`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string][]event{}
	for rows.Next() {
		var run string
		var e event
		var payload []byte
		if err := rows.Scan(&run, &e.id, &e.typ, &e.attempt, &e.at, &payload); err != nil {
			c.t.Fatal(err)
		}
		// A payload that is not an object carries none of the fields read.
		_ = json.Unmarshal(payload, &e.payload)
		out[run] = append(out[run], e)
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// lease is one claim of a run, as its events tell it.
type lease struct {
	runner string
	epoch  int64
	// lostAt is the time of the runner_lost event that ended the lease
	// (zero when the sweep did not end it).
	lostAt time.Time
}

// leaseHistory is what checkLeaseOrder learnt about one run: its leases
// in epoch order (leases[k-1] has epoch k).
type leaseHistory struct {
	leases []lease
}

// holders lists the runner of each epoch.
func (h *leaseHistory) holders() []string {
	out := make([]string, len(h.leases))
	for i, l := range h.leases {
		out[i] = l.runner
	}
	return out
}

// lostBy returns the lease of runner that the sweep ended between since
// and until, and the lease that followed it (nil when none did).
func (h *leaseHistory) lostBy(runner string, since, until time.Time) (lost, next *lease) {
	for i := range h.leases {
		l := &h.leases[i]
		if l.runner == runner && !l.lostAt.IsZero() && l.lostAt.After(since) && l.lostAt.Before(until) {
			if i+1 < len(h.leases) {
				return l, &h.leases[i+1]
			}
			return l, nil
		}
	}
	return nil, nil
}

// checkLeaseOrder replays each run's events through the lease state
// machine and reports every write made without the lease: an event of a
// step or of the run's start or end between the end of a lease (the
// sweep's runner_lost, a release, a re-queue) and the next claim, a step
// event of another attempt than the holder's, a run_started or
// runner_lost naming another runner or epoch than the last claim. Since
// the sweep starts a new attempt and every claim bumps the epoch, a write
// by a superseded runner would show up as one of these. It also checks the
// run's final lease_epoch is the number of claims.
func (c *cluster) checkLeaseOrder(runs map[string]*runRow, evs map[string][]event) map[string]*leaseHistory {
	c.t.Helper()
	out := map[string]*leaseHistory{}
	for id, r := range runs {
		h := &leaseHistory{}
		out[id] = h
		leased, attempt := false, 0
		cur := func() lease {
			if len(h.leases) == 0 {
				return lease{}
			}
			return h.leases[len(h.leases)-1]
		}
		bad := func(e event, format string, args ...any) {
			c.t.Errorf("run %s event %d %s (attempt %d): %s", id, e.id, e.typ, e.attempt, fmt.Sprintf(format, args...))
		}
		for _, e := range evs[id] {
			switch e.typ {
			case starflowtype.EventRunClaimed:
				if leased {
					bad(e, "claimed while %s held the lease", cur().runner)
				}
				leased, attempt = true, e.attempt
				h.leases = append(h.leases, lease{runner: e.payload.RunnerID, epoch: int64(len(h.leases) + 1)})
			case starflowtype.EventRunStarted:
				if l := cur(); !leased || e.payload.RunnerID != l.runner || e.payload.LeaseEpoch != l.epoch {
					bad(e, "started by %s epoch %d; the lease is %s epoch %d (held: %v)",
						e.payload.RunnerID, e.payload.LeaseEpoch, l.runner, l.epoch, leased)
				}
			case starflowtype.EventNodeStart, starflowtype.EventNodeRetry, starflowtype.EventNodeComplete,
				starflowtype.EventNodeError, starflowtype.EventNodeSkipped:
				if !leased || e.attempt != attempt {
					bad(e, "written without the lease (held: %v, holder's attempt %d)", leased, attempt)
				}
			case starflowtype.EventPhase:
				if !leased {
					bad(e, "written without the lease")
				}
			case starflowtype.EventRunnerLost:
				if l := cur(); !leased || e.payload.RunnerID != l.runner || e.payload.LeaseEpoch != l.epoch {
					bad(e, "sweep found %s epoch %d; the lease is %s epoch %d (held: %v)",
						e.payload.RunnerID, e.payload.LeaseEpoch, l.runner, l.epoch, leased)
				}
				if len(h.leases) > 0 {
					h.leases[len(h.leases)-1].lostAt = e.at
				}
				leased = false
			case starflowtype.EventRunSucceeded:
				if !leased {
					bad(e, "written without the lease")
				}
				leased = false
			case starflowtype.EventRunQueued, starflowtype.EventRunInterrupted, starflowtype.EventRunFailed:
				leased = false
			}
		}
		if int64(len(h.leases)) != r.epoch {
			c.t.Errorf("run %s: lease_epoch %d after %d claims", id, r.epoch, len(h.leases))
		}
	}
	return out
}

// checkTakenOver checks that the sweep ended runner's lease of some run
// between since and until (database clock) and that for each such run
// another runner claimed it next; it returns those runs.
func checkTakenOver(t *testing.T, hist map[string]*leaseHistory, runner string, since, until time.Time) []string {
	t.Helper()
	var ids []string
	for id, h := range hist {
		lost, next := h.lostBy(runner, since, until)
		if lost == nil {
			continue
		}
		ids = append(ids, id)
		if next == nil || next.runner == runner || next.epoch < 2 {
			t.Errorf("run %s: lease epoch %d of %s ended by the sweep but not taken over by another runner (claims: %v)",
				id, lost.epoch, runner, h.holders())
		}
	}
	if len(ids) == 0 {
		t.Fatalf("the sweep declared %s lost on no run", runner)
	}
	slices.Sort(ids)
	return ids
}

// checkFinalEffects checks that every step of every run has an accepted
// side effect carrying the run's final epoch: the final attempt's writes
// reached the service under the lease that completed the run.
func checkFinalEffects(t *testing.T, runs map[string]*runRow, effects []effect, steps int) {
	t.Helper()
	final := map[string]bool{}
	for _, e := range effects {
		if r, ok := runs[e.runID]; ok && e.accepted && e.epoch == r.epoch {
			final[e.runID+"/"+e.stepID] = true
		}
	}
	for id := range runs {
		for i := 1; i <= steps; i++ {
			if !final[id+"/"+stepID(i)] {
				t.Errorf("run %s step %s: no accepted side effect with the run's final epoch %d", id, stepID(i), runs[id].epoch)
			}
		}
	}
}

// checkCheckpointsMatchCompletions checks, for every run and attempt,
// that the checkpoints and the succeeded step rows are exactly as many as
// the node_complete events (the three are written by one transaction, so
// with checkLeaseOrder this shows no checkpoint was written without the
// lease either).
func (c *cluster) checkCheckpointsMatchCompletions() {
	c.t.Helper()
	rows, err := c.pool().Query(context.Background(), `
		WITH k AS (SELECT run_id, attempt, count(*) AS n FROM workflow_run_checkpoints GROUP BY 1, 2),
		     s AS (SELECT run_id, attempt, count(*) AS n FROM workflow_steps WHERE status = 'succeeded' GROUP BY 1, 2),
		     e AS (SELECT run_id, attempt, count(*) AS n FROM workflow_run_events WHERE event_type = 'node_complete' GROUP BY 1, 2)
		SELECT run_id::text, attempt, coalesce(k.n, 0), coalesce(s.n, 0), coalesce(e.n, 0)
		  FROM k FULL JOIN s USING (run_id, attempt) FULL JOIN e USING (run_id, attempt)
		 WHERE k.n IS DISTINCT FROM e.n OR s.n IS DISTINCT FROM e.n`)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var run string
		var attempt, k, s, e int
		if err := rows.Scan(&run, &attempt, &k, &s, &e); err != nil {
			c.t.Fatal(err)
		}
		c.t.Errorf("run %s attempt %d: %d checkpoints, %d succeeded steps, %d node_complete events", run, attempt, k, s, e)
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
}
