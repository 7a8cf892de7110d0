//go:build chaos

package chaos

// The checker: it verifies over the database, the warm store and the
// side-effect log that nothing was lost, doubled or left behind (the
// package doc is in doc.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// The invariants Check verifies, in report order (docs/reliability.md,
// "Invariants").
const (
	InvariantTerminal        = "terminal"
	InvariantLease           = "lease"
	InvariantCheckpointOnce  = "checkpoint_once"
	InvariantEffectFenced    = "effect_fenced"
	InvariantWakeOnce        = "wake_once"
	InvariantTickOnce        = "tick_once"
	InvariantOutboxDrained   = "outbox_drained"
	InvariantWarmEqualsCold  = "warm_equals_cold"
	InvariantOutputReference = "output_reference"
)

// Invariants lists the Invariant* constants in report order.
var Invariants = []string{
	InvariantTerminal, InvariantLease, InvariantCheckpointOnce, InvariantEffectFenced,
	InvariantWakeOnce, InvariantTickOnce, InvariantOutboxDrained, InvariantWarmEqualsCold,
	InvariantOutputReference,
}

// Effect is one request the side-effect service decided, as it logged it.
type Effect struct {
	Seq      int64     // decision order, from 1
	RunID    string    // from the Starflow-Fencing-Token header "<run_id>/<epoch>"
	Key      string    // the Idempotency-Key header "<run_id>/<scope_path>/<step_id>"
	Epoch    int64     // the lease epoch of the fencing token
	Accepted bool      // the service applied it (answered 2xx)
	Refused  string    // why not: "stale" (a higher epoch was accepted for Key: 409), "flaky" (503 on purpose), ""
	Worker   string    // the service's label of the caller (free text)
	At       time.Time // when the service decided
}

// Input is what Check reads.
type Input struct {
	// DB is Starflow's database; its search_path is Starflow's schema.
	DB *pgxpool.Pool
	// Warm is the warm store to compare with the cold store (e.g. a
	// natskv.Store opened on the harness's NATS URL); nil: the
	// warm_equals_cold invariant is not checked (0 checked).
	Warm warm.Store
	// Cold is a state adapter on the same database and schema as DB (a
	// pgstore.Store), which must also implement state.Outbox. Required
	// when Warm is set: the cold projection is built by the mirror's own
	// code (mirror.RunEntry over GetRun and ListSteps, the version from
	// MirrorRuns), so the checker compares exactly what the sweep does.
	Cold state.Adapter
	// Effects is the side-effect service's log, in any order.
	Effects []Effect
	// Reference maps workflow name → canonical input JSON (CanonicalJSON
	// of the run's input) → the expected output.
	Reference map[string]map[string]json.RawMessage
	// MayWait holds the run ids the harness left waiting on purpose.
	MayWait map[string]bool
}

// Violation is one broken invariant.
type Violation struct {
	Invariant string   // one of the Invariant* constants
	RunID     string   // the run concerned ("" for none)
	Detail    string   // what is wrong, one sentence with the values
	History   []string // the run's row, its events in order, its side effects; short lines
}

// Report is the result of Check.
type Report struct {
	Runs, Steps  int            // runs (workflow_runs rows) and step executions (workflow_steps rows) seen
	Checked      map[string]int // per invariant: how many items were checked
	Unreferenced int            // succeeded runs whose input has no reference output
	Violations   []Violation
}

// Count is the number of violations of invariant inv.
func (r *Report) Count(inv string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Invariant == inv {
			n++
		}
	}
	return n
}

// CanonicalJSON is the reference key of a run input: json.Marshal of raw
// decoded into any (object keys sorted). Empty or JSON null input is
// "null". Errors: raw is not valid JSON.
func CanonicalJSON(raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "null", nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// historyEvents bounds the events one history lists (the last ones).
const historyEvents = 60

type checker struct {
	in  Input
	rep *Report
}

// Check verifies every invariant (docs/reliability.md, "Invariants") and
// reports the violations found. The error is only for what it cannot read
// (a query or the warm store failing, Warm without Cold); violations are
// never errors.
func Check(ctx context.Context, in Input) (*Report, error) {
	if in.DB == nil {
		return nil, errors.New("chaos: Input.DB is nil")
	}
	c := &checker{in: in, rep: &Report{Checked: map[string]int{}}}
	for _, inv := range Invariants {
		c.rep.Checked[inv] = 0
	}
	if err := in.DB.QueryRow(ctx, `SELECT (SELECT count(*) FROM workflow_runs), (SELECT count(*) FROM workflow_steps)`).
		Scan(&c.rep.Runs, &c.rep.Steps); err != nil {
		return nil, fmt.Errorf("chaos: count runs: %w", err)
	}
	for _, f := range []func(context.Context) error{
		c.terminal, c.lease, c.checkpointOnce, c.effectFenced, c.wakeOnce, c.tickOnce,
		c.outboxDrained, c.warmEqualsCold, c.outputReference,
	} {
		if err := f(ctx); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
	}
	for i := range c.rep.Violations {
		v := &c.rep.Violations[i]
		h, err := c.history(ctx, v.RunID)
		if err != nil {
			return nil, fmt.Errorf("chaos: history of run %s: %w", v.RunID, err)
		}
		v.History = append(h, v.History...)
	}
	return c.rep, nil
}

func (c *checker) violate(inv, runID, format string, args ...any) {
	c.rep.Violations = append(c.rep.Violations, Violation{Invariant: inv, RunID: runID, Detail: fmt.Sprintf(format, args...)})
}

// terminal: every run is succeeded, failed or cancelled; a run of MayWait
// may also be parked on a wait or paused (decision 228).
func (c *checker) terminal(ctx context.Context) error {
	rows, err := c.in.DB.Query(ctx, `SELECT id::text, status, claim_state FROM workflow_runs ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("terminal: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status, claim string
		if err := rows.Scan(&id, &status, &claim); err != nil {
			return fmt.Errorf("terminal: %w", err)
		}
		c.rep.Checked[InvariantTerminal]++
		switch {
		case status == "succeeded" || status == "failed" || status == "cancelled":
		case c.in.MayWait[id] && (claim == "parked" || status == "paused"):
		case c.in.MayWait[id]:
			c.violate(InvariantTerminal, id, "run %s may wait but is %s/%s, not parked on a wait", id, status, claim)
		default:
			c.violate(InvariantTerminal, id, "run %s ended the test %s/%s, not succeeded, failed or cancelled", id, status, claim)
		}
	}
	return rows.Err()
}

// lease: no run is running with its claim held (claim_state claimed or
// running) past its lease (lease_until NULL or before the database's
// now()). Every run is checked.
func (c *checker) lease(ctx context.Context) error {
	rows, err := c.in.DB.Query(ctx, `SELECT id::text, status, claim_state, coalesce(leased_by, ''), lease_until, now(),
		status = 'running' AND claim_state IN ('claimed', 'running') AND (lease_until IS NULL OR lease_until < now())
		FROM workflow_runs ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("lease: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, status, claim, by string
		var until *time.Time
		var now time.Time
		var expired bool
		if err := rows.Scan(&id, &status, &claim, &by, &until, &now, &expired); err != nil {
			return fmt.Errorf("lease: %w", err)
		}
		c.rep.Checked[InvariantLease]++
		if expired {
			c.violate(InvariantLease, id, "run %s is %s/%s by %q with lease_until %v, before the database's now %v",
				id, status, claim, by, fmtTime(until), now.UTC().Format(time.RFC3339Nano))
		}
	}
	return rows.Err()
}

// checkpointOnce: the primary key of workflow_run_checkpoints makes two
// rows per (run, scope, step, attempt) impossible, so the completions are
// checked where they are recorded more than once if at all: the
// node_complete events, one per (run, scope path, step, attempt).
func (c *checker) checkpointOnce(ctx context.Context) error {
	rows, err := c.in.DB.Query(ctx, `SELECT run_id::text, scope_path, coalesce(node_id, ''), attempt, count(*)
		FROM workflow_run_events WHERE event_type = 'node_complete'
		GROUP BY run_id, scope_path, node_id, attempt ORDER BY run_id, scope_path, node_id, attempt`)
	if err != nil {
		return fmt.Errorf("checkpoint_once: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var run, scope, step string
		var attempt, n int
		if err := rows.Scan(&run, &scope, &step, &attempt, &n); err != nil {
			return fmt.Errorf("checkpoint_once: %w", err)
		}
		c.rep.Checked[InvariantCheckpointOnce]++
		if n > 1 {
			c.violate(InvariantCheckpointOnce, run, "step %q (scope %q) of run %s completed %d times in attempt %d", step, scope, run, n, attempt)
		}
	}
	return rows.Err()
}

// effectFenced: per idempotency key, in Seq order, every accepted effect
// after the first carries a strictly higher epoch than the accepted one
// before it; and every key is "<run_id>/<scope_path>/<step_id>" of the
// request's own run, naming a step of that run.
func (c *checker) effectFenced(ctx context.Context) error {
	effects := append([]Effect(nil), c.in.Effects...)
	sort.SliceStable(effects, func(i, j int) bool { return effects[i].Seq < effects[j].Seq })
	steps := map[string]bool{} // run/scope/step
	rows, err := c.in.DB.Query(ctx, `SELECT DISTINCT run_id::text || '/' || scope_path || '/' || step_id FROM workflow_steps`)
	if err != nil {
		return fmt.Errorf("effect_fenced: %w", err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			rows.Close()
			return fmt.Errorf("effect_fenced: %w", err)
		}
		steps[k] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("effect_fenced: %w", err)
	}
	last := map[string]Effect{} // key → last accepted
	for _, e := range effects {
		c.rep.Checked[InvariantEffectFenced]++
		if !strings.HasPrefix(e.Key, e.RunID+"/") {
			c.violate(InvariantEffectFenced, e.RunID, "effect seq %d of run %s used key %q, not one of its own run", e.Seq, e.RunID, e.Key)
			continue
		}
		if !steps[e.Key] {
			c.violate(InvariantEffectFenced, e.RunID, "effect seq %d of run %s used key %q, which names no step instance of the run", e.Seq, e.RunID, e.Key)
		}
		if !e.Accepted {
			continue
		}
		if p, ok := last[e.Key]; ok && e.Epoch <= p.Epoch {
			c.violate(InvariantEffectFenced, e.RunID, "effect seq %d for key %q was accepted at epoch %d after seq %d accepted at epoch %d",
				e.Seq, e.Key, e.Epoch, p.Seq, p.Epoch)
		}
		last[e.Key] = e
	}
	return nil
}

// wakeOnce: each wait is woken at most once (one wake_received event per
// wait id), and a wait that was woken is not pending again (a consumed
// wait reset could be woken a second time).
func (c *checker) wakeOnce(ctx context.Context) error {
	rows, err := c.in.DB.Query(ctx, `SELECT w.id::text, w.run_id::text, w.status, w.step_id,
		(SELECT count(*) FROM workflow_run_events e WHERE e.run_id = w.run_id AND e.event_type = 'wake_received'
			AND e.payload_json->>'wait_id' = w.id::text)
		FROM workflow_waits w ORDER BY w.seq`)
	if err != nil {
		return fmt.Errorf("wake_once: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, run, status, step string
		var n int
		if err := rows.Scan(&id, &run, &status, &step, &n); err != nil {
			return fmt.Errorf("wake_once: %w", err)
		}
		c.rep.Checked[InvariantWakeOnce]++
		switch {
		case n > 1:
			c.violate(InvariantWakeOnce, run, "wait %s (step %q) of run %s was woken %d times", id, step, run, n)
		case n == 1 && status == "pending":
			c.violate(InvariantWakeOnce, run, "wait %s (step %q) of run %s was woken but is pending again", id, step, run)
		}
	}
	return rows.Err()
}

// tickOnce: one run per scheduled tick. A tick's run carries trigger_type
// 'schedule' and the idempotency key schedule/<workflow>/<index>/<tick>
// (starflow.ScheduleIdempotencyKey); two runs with one key ran the tick
// twice. Runs are workspace-scoped, so the key is per workspace.
func (c *checker) tickOnce(ctx context.Context) error {
	rows, err := c.in.DB.Query(ctx, `SELECT workspace_id, coalesce(idempotency_key, ''), array_agg(id::text ORDER BY seq)
		FROM workflow_runs WHERE trigger_type = 'schedule' GROUP BY workspace_id, idempotency_key ORDER BY 1, 2`)
	if err != nil {
		return fmt.Errorf("tick_once: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var ws, key string
		var ids []string
		if err := rows.Scan(&ws, &key, &ids); err != nil {
			return fmt.Errorf("tick_once: %w", err)
		}
		c.rep.Checked[InvariantTickOnce]++
		if key == "" {
			for _, id := range ids {
				c.violate(InvariantTickOnce, id, "scheduled run %s has no tick idempotency key", id)
			}
			continue
		}
		if len(ids) > 1 {
			c.violate(InvariantTickOnce, ids[1], "tick %q (workspace %s) started %d runs: %s", key, ws, len(ids), strings.Join(ids, ", "))
			v := &c.rep.Violations[len(c.rep.Violations)-1]
			for _, id := range ids {
				if id != ids[1] {
					v.History = append(v.History, "the same tick's run "+id)
				}
			}
		}
	}
	return rows.Err()
}

// outboxDrained: no mirror_outbox row is left unapplied.
func (c *checker) outboxDrained(ctx context.Context) error {
	var total int
	if err := c.in.DB.QueryRow(ctx, `SELECT count(*) FROM mirror_outbox`).Scan(&total); err != nil {
		return fmt.Errorf("outbox_drained: %w", err)
	}
	c.rep.Checked[InvariantOutboxDrained] = total
	rows, err := c.in.DB.Query(ctx, `SELECT run_id, count(*), min(id), array_agg(DISTINCT kind ORDER BY kind)
		FROM mirror_outbox WHERE applied_at IS NULL GROUP BY run_id ORDER BY min(id)`)
	if err != nil {
		return fmt.Errorf("outbox_drained: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var run string
		var n, first int64
		var kinds []string
		if err := rows.Scan(&run, &n, &first, &kinds); err != nil {
			return fmt.Errorf("outbox_drained: %w", err)
		}
		c.violate(InvariantOutboxDrained, run, "run %q has %d unapplied mirror_outbox rows (first id %d, kinds %s)", run, n, first, strings.Join(kinds, ","))
	}
	return rows.Err()
}

// warmEqualsCold: every run's warm entry is the mirror's projection of its
// cold row at its cold version (mirror.RunEntry and mirror.Hash, as the
// hash sweep compares them).
func (c *checker) warmEqualsCold(ctx context.Context) error {
	if c.in.Warm == nil {
		return nil
	}
	if c.in.Cold == nil {
		return errors.New("warm_equals_cold: Input.Warm is set but Input.Cold is nil")
	}
	ob, ok := c.in.Cold.(state.Outbox)
	if !ok {
		return fmt.Errorf("warm_equals_cold: Input.Cold (%T) does not implement state.Outbox", c.in.Cold)
	}
	var ids []string
	rows, err := c.in.DB.Query(ctx, `SELECT id::text FROM workflow_runs ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("warm_equals_cold: %w", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("warm_equals_cold: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("warm_equals_cold: %w", err)
	}
	for _, id := range ids {
		mrs, err := ob.MirrorRuns(ctx, &state.MirrorRunsParams{RunIDs: []string{id}})
		if err != nil || len(mrs) != 1 {
			return fmt.Errorf("warm_equals_cold: mirror version of run %s: %d rows, %v", id, len(mrs), err)
		}
		run, err := c.in.Cold.GetRun(ctx, &state.GetRunParams{ID: id})
		if err != nil {
			return fmt.Errorf("warm_equals_cold: cold run %s: %w", id, err)
		}
		steps, err := c.in.Cold.ListSteps(ctx, &state.ListStepsParams{RunID: id, Attempt: run.Attempt})
		if err != nil {
			return fmt.Errorf("warm_equals_cold: cold steps of run %s: %w", id, err)
		}
		want := mirror.RunEntry(run, mirror.CurrentSteps(steps, run.Attempt), mrs[0].Version)
		c.rep.Checked[InvariantWarmEqualsCold]++
		got, err := c.in.Warm.GetRun(ctx, id)
		switch {
		case errors.Is(err, warm.ErrNotFound):
			c.violate(InvariantWarmEqualsCold, id, "run %s is %s at version %d in cold but missing from warm", id, want.Status, want.Version)
		case err != nil:
			return fmt.Errorf("warm_equals_cold: warm run %s: %w", id, err)
		case mirror.Hash(got) != want.Hash:
			c.violate(InvariantWarmEqualsCold, id, "run %s differs: cold %s", id, entryDiff(want, got))
		}
	}
	return nil
}

// entryDiff names the fields of the drift hash that differ.
func entryDiff(want, got *warm.RunEntry) string {
	var d []string
	if want.Status != got.Status {
		d = append(d, fmt.Sprintf("status %s, warm %s", want.Status, got.Status))
	}
	if want.Phase != got.Phase {
		d = append(d, fmt.Sprintf("phase %q, warm %q", want.Phase, got.Phase))
	}
	if want.Version != got.Version {
		d = append(d, fmt.Sprintf("version %d, warm %d", want.Version, got.Version))
	}
	if len(want.CurrentSteps) != len(got.CurrentSteps) {
		d = append(d, fmt.Sprintf("%d current steps, warm %d", len(want.CurrentSteps), len(got.CurrentSteps)))
	}
	if len(d) == 0 {
		d = append(d, fmt.Sprintf("hash %s, warm %s", want.Hash, mirror.Hash(got)))
	}
	return strings.Join(d, "; ")
}

// outputReference: a succeeded run's output equals the reference of its
// workflow and canonical input (compared as decoded JSON).
func (c *checker) outputReference(ctx context.Context) error {
	rows, err := c.in.DB.Query(ctx, `SELECT id::text, workflow_name, coalesce(input_json::text, ''), coalesce(output_json::text, '')
		FROM workflow_runs WHERE status = 'succeeded' ORDER BY seq`)
	if err != nil {
		return fmt.Errorf("output_reference: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, wf, input, output string
		if err := rows.Scan(&id, &wf, &input, &output); err != nil {
			return fmt.Errorf("output_reference: %w", err)
		}
		key, err := CanonicalJSON(json.RawMessage(input))
		if err != nil {
			return fmt.Errorf("output_reference: input of run %s: %w", id, err)
		}
		ref, ok := c.in.Reference[wf][key]
		if !ok {
			c.rep.Unreferenced++
			continue
		}
		c.rep.Checked[InvariantOutputReference]++
		if !jsonEqual(ref, json.RawMessage(output)) {
			c.violate(InvariantOutputReference, id, "run %s of %s with input %s output %s, reference %s", id, wf, key, output, string(ref))
		}
	}
	return rows.Err()
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if len(bytes.TrimSpace(a)) == 0 {
		a = json.RawMessage("null")
	}
	if len(bytes.TrimSpace(b)) == 0 {
		b = json.RawMessage("null")
	}
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return reflect.DeepEqual(x, y)
}

// history is the run's row, its waits, its wake inbox entries, its last
// events in order and its side effects, one short line each.
func (c *checker) history(ctx context.Context, runID string) ([]string, error) {
	if runID == "" || !looksLikeUUID(runID) {
		return []string{"(no run)"}, nil
	}
	var h []string
	var wf, status, claim, by string
	var attempt int
	var epoch int64
	var until *time.Time
	err := c.in.DB.QueryRow(ctx, `SELECT workflow_name, status, claim_state, coalesce(leased_by, ''), lease_until, lease_epoch, attempt
		FROM workflow_runs WHERE id = $1`, runID).Scan(&wf, &status, &claim, &by, &until, &epoch, &attempt)
	if err != nil {
		h = append(h, fmt.Sprintf("run %s: no row (%v)", runID, err))
	} else {
		h = append(h, fmt.Sprintf("run %s %s: %s/%s attempt %d epoch %d leased_by %q until %s", runID, wf, status, claim, attempt, epoch, by, fmtTime(until)))
	}
	rows, err := c.in.DB.Query(ctx, `SELECT id::text, step_id, kind, status, attempt FROM workflow_waits WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, step, kind, st string
		var a int
		if err := rows.Scan(&id, &step, &kind, &st, &a); err != nil {
			rows.Close()
			return nil, err
		}
		h = append(h, fmt.Sprintf("wait %s step %s %s attempt %d: %s", id, step, kind, a, st))
	}
	rows.Close()
	rows, err = c.in.DB.Query(ctx, `SELECT signal, created_at, consumed_at FROM workflow_wake_inbox WHERE run_id = $1 ORDER BY seq`, runID)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var signal string
		var at time.Time
		var consumed *time.Time
		if err := rows.Scan(&signal, &at, &consumed); err != nil {
			rows.Close()
			return nil, err
		}
		h = append(h, fmt.Sprintf("inbox %s at %s, consumed %s", signal, fmtTime(&at), fmtTime(consumed)))
	}
	rows.Close()
	rows, err = c.in.DB.Query(ctx, `SELECT * FROM (SELECT id, attempt, event_type, coalesce(node_id, ''), scope_path, created_at,
		coalesce(payload_json->>'wait_id', '') FROM workflow_run_events WHERE run_id = $1 ORDER BY id DESC LIMIT $2) e ORDER BY id`, runID, historyEvents)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id int64
		var a int
		var typ, node, scope, wait string
		var at time.Time
		if err := rows.Scan(&id, &a, &typ, &node, &scope, &at, &wait); err != nil {
			rows.Close()
			return nil, err
		}
		line := fmt.Sprintf("event %d %s a%d %s", id, at.UTC().Format("15:04:05.000"), a, typ)
		if node != "" {
			line += " " + strings.TrimPrefix(scope+"/"+node, "/")
		}
		if wait != "" {
			line += " wait " + wait
		}
		h = append(h, line)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, e := range c.in.Effects {
		if e.RunID == runID || strings.HasPrefix(e.Key, runID+"/") {
			verdict := "accepted"
			if !e.Accepted {
				verdict = "refused " + e.Refused
			}
			h = append(h, fmt.Sprintf("effect seq %d key %s epoch %d worker %s: %s", e.Seq, e.Key, e.Epoch, e.Worker, verdict))
		}
	}
	return h, nil
}

func looksLikeUUID(s string) bool {
	return len(s) == 36 && strings.Count(s, "-") == 4
}

func fmtTime(t *time.Time) string {
	if t == nil {
		return "none"
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// Print writes the report: a table of invariant, checked, violations; the
// totals; then each violation with its run id and history.
func (r *Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "invariant\tchecked\tviolations")
	for _, inv := range Invariants {
		fmt.Fprintf(tw, "%s\t%d\t%d\n", inv, r.Checked[inv], r.Count(inv))
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "runs %d, step executions %d, unreferenced outputs %d, violations %d\n", r.Runs, r.Steps, r.Unreferenced, len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(w, "\n%s run %s: %s\n", v.Invariant, v.RunID, v.Detail)
		for _, l := range v.History {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}
