//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/pgtest"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/warm/natskv"
)

// effectService is an httptest side-effect service that logs every
// decision as an Effect. With fence on it refuses a request whose epoch is
// not above the highest accepted for its key (409 "stale"), as a fencing
// service must; with fence off it accepts everything.
type effectService struct {
	mu      sync.Mutex
	fence   bool
	effects []Effect
	high    map[string]int64
	srv     *httptest.Server
}

func newEffectService(t *testing.T) *effectService {
	s := &effectService{fence: true, high: map[string]int64{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *effectService) serve(w http.ResponseWriter, r *http.Request) {
	tok := r.Header.Get("Starflow-Fencing-Token")
	i := strings.LastIndexByte(tok, '/')
	epoch, _ := strconv.ParseInt(tok[i+1:], 10, 64)
	e := Effect{RunID: tok[:max(i, 0)], Key: r.Header.Get("Idempotency-Key"), Epoch: epoch, Worker: r.Header.Get("X-Worker"), At: time.Now()}
	s.mu.Lock()
	if h, ok := s.high[e.Key]; s.fence && ok && epoch <= h {
		e.Refused = "stale"
	} else {
		e.Accepted = true
		s.high[e.Key] = max(s.high[e.Key], epoch)
	}
	e.Seq = int64(len(s.effects) + 1)
	s.effects = append(s.effects, e)
	s.mu.Unlock()
	if !e.Accepted {
		http.Error(w, "stale", http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"charged": true}`))
}

func (s *effectService) log() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Effect(nil), s.effects...)
}

// resend sends the logged request e again (its key and fencing token):
// what a worker holding a stale lease would send.
func (s *effectService) resend(t *testing.T, e Effect) int {
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL, nil)
	req.Header.Set("Idempotency-Key", e.Key)
	req.Header.Set("Starflow-Fencing-Token", e.RunID+"/"+strconv.FormatInt(e.Epoch, 10))
	req.Header.Set("X-Worker", "stale")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// world is a real schema, a pgstore with the mirror hook, an embedded
// NATS JetStream warm store and an engine with maintenance (drainer,
// sweep, scheduler) on them, after a small workload.
type world struct {
	schema, url string
	pool        *pgxpool.Pool
	store       *pgstore.Store
	warm        *natskv.Store
	eng         *starflow.Engine
	svc         *effectService
	ref         map[string]map[string]json.RawMessage
	mayWait     map[string]bool
	calc        []string // succeeded calc runs
	effect      string   // the service_call run
	signalled   string   // the run woken by a signal
	waiting     string   // the run left waiting (MayWait)
	tick        string   // a run of a schedule tick
}

// wakeKeys is the wake-token key ring of every engine of a world (a
// PostgreSQL store keeps no signing secret).
const wakeKeys = "k1:Y2hhb3MtY2hlY2tlci13YWtlLWtleS0zMi1ieXRlcyE="

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newWorld(t *testing.T) *world {
	t.Helper()
	pgtest.Require(t)
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	w := &world{schema: "chaoscheck_" + hex.EncodeToString(b[:]), mayWait: map[string]bool{}}
	u, err := url.Parse(pgtest.URL())
	if err != nil {
		t.Fatal(err)
	}
	w.store, err = pgstore.Open(ctx, pgstore.Config{URL: pgtest.URL(), Schema: w.schema, Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.store.Close()
		conn, err := pgx.Connect(context.Background(), pgtest.URL())
		if err != nil {
			t.Errorf("drop schema %s: %v", w.schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{w.schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", w.schema, err)
		}
	})
	if err := w.store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	w.pool = w.store.Pool()
	q := u.Query()
	q.Set("search_path", w.schema)
	u.RawQuery = q.Encode()
	w.url = u.String()
	w.warm, err = natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: t.TempDir()}, natskv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.warm.Close() })
	w.eng, err = starflow.New(starflow.Config{Store: w.store, Warm: w.warm, Maintenance: true, ScheduleInterval: 100 * time.Millisecond,
		WakeKeys: wakeKeys, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			w.stop(t)
		}
	})
	w.svc = newEffectService(t)
	for _, src := range []string{`name: calc
steps:
  - id: a
    context_set: {x: "${{ input.n + 1 }}"}
  - id: b
    context_set: {y: "${{ variables.x * 2 }}"}
output: "${{ variables }}"
`, `name: effect
steps:
  - id: charge
    service_call: {method: GET, url: "` + w.svc.srv.URL + `"}
output: "${{ steps.charge.output.body }}"
`, `name: waiter
steps:
  - id: gate
    wait: {signal: go}
  - id: after
    context_set: {woken: true}
output: "${{ variables }}"
`, `name: ticker
schedules:
  - {cron: "*/1 * * * * *", overlap: allow, catchup: none}
steps:
  - id: t
    context_set: {ticked: true}
output: "${{ variables }}"
`} {
		if _, err := w.eng.Apply(ctx, "wf.yaml", []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	w.ref = map[string]map[string]json.RawMessage{
		"calc":   {`{"n":1}`: json.RawMessage(`{"x":2,"y":4}`), `{"n":2}`: json.RawMessage(`{"x":3,"y":6}`)},
		"effect": {`{}`: json.RawMessage(`{"charged":true}`)},
		"waiter": {`{}`: json.RawMessage(`{"woken":true}`)},
		"ticker": {`{}`: json.RawMessage(`{"ticked":true}`)},
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	enqueue := func(name string, input any) string {
		r, err := w.eng.Enqueue(ctx, name, input, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	for _, n := range []int{1, 2} {
		w.calc = append(w.calc, enqueue("calc", map[string]any{"n": n}))
	}
	w.effect = enqueue("effect", nil)
	w.signalled = enqueue("waiter", nil)
	w.waiting = enqueue("waiter", nil)
	w.mayWait[w.waiting] = true
	for _, id := range []string{w.signalled, w.waiting} {
		w.await(t, wctx, "parked", `SELECT claim_state = 'parked' FROM workflow_runs WHERE id = $1`, id)
	}
	if _, err := w.eng.Signal(ctx, w.signalled, "go", nil); err != nil {
		t.Fatal(err)
	}
	for _, id := range append([]string{w.effect, w.signalled}, w.calc...) {
		r, err := w.eng.WaitRun(wctx, id)
		if err != nil || r.Status != starflowtype.RunSucceeded {
			t.Fatalf("run %s: %+v, %v", id, r, err)
		}
	}
	w.await(t, wctx, "a tick's run succeeded", `SELECT EXISTS (SELECT 1 FROM workflow_runs WHERE trigger_type = 'schedule' AND status = 'succeeded')`)
	if _, err := w.eng.PauseSchedules(ctx, "ticker"); err != nil {
		t.Fatal(err)
	}
	w.await(t, wctx, "every tick's run ended", `SELECT NOT EXISTS (SELECT 1 FROM workflow_runs WHERE trigger_type = 'schedule' AND status NOT IN ('succeeded', 'failed', 'cancelled'))`)
	if err := w.pool.QueryRow(ctx, `SELECT id::text FROM workflow_runs WHERE trigger_type = 'schedule' AND status = 'succeeded' ORDER BY seq LIMIT 1`).Scan(&w.tick); err != nil {
		t.Fatal(err)
	}
	w.await(t, wctx, "the outbox drained", `SELECT NOT EXISTS (SELECT 1 FROM mirror_outbox WHERE applied_at IS NULL)`)
	// The engine stops before any corruption, so neither its drainer nor
	// its sweep repairs what the tests break.
	w.stop(t)
	stopped = true
	return w
}

func (w *world) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := w.eng.Stop(ctx); err != nil {
		t.Errorf("stop engine: %v", err)
	}
}

func (w *world) await(t *testing.T, ctx context.Context, what, sql string, args ...any) {
	t.Helper()
	for {
		var ok bool
		if err := w.pool.QueryRow(ctx, sql, args...).Scan(&ok); err != nil {
			t.Fatalf("await %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("await %s: %v", what, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (w *world) input() Input {
	return Input{DB: w.pool, Warm: w.warm, Cold: w.store, Effects: w.svc.log(), Reference: w.ref, MayWait: w.mayWait}
}

func (w *world) exec(t *testing.T, sql string, args ...any) {
	t.Helper()
	if _, err := w.pool.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func check(t *testing.T, in Input) *Report {
	t.Helper()
	rep, err := Check(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// wantViolation asserts rep has a violation of inv on run with a history.
func wantViolation(t *testing.T, rep *Report, inv, run string) {
	t.Helper()
	for _, v := range rep.Violations {
		if v.Invariant == inv && v.RunID == run {
			if len(v.History) == 0 || v.Detail == "" {
				t.Fatalf("%s violation of run %s without detail or history: %+v", inv, run, v)
			}
			return
		}
	}
	var buf bytes.Buffer
	rep.Print(&buf)
	t.Fatalf("no %s violation of run %s:\n%s", inv, run, buf.String())
}

// TestCheck runs the workload once, checks the clean result has no
// violation and every invariant checked something, then breaks each
// invariant in turn (on runs the other subtests leave alone) and asserts
// the checker reports it. The subtests run in order on one world.
func TestCheck(t *testing.T) {
	w := newWorld(t)

	t.Run("clean", func(t *testing.T) {
		rep := check(t, w.input())
		var buf bytes.Buffer
		rep.Print(&buf)
		if len(rep.Violations) != 0 {
			t.Fatalf("clean workload has violations:\n%s", buf.String())
		}
		for _, inv := range Invariants {
			if rep.Checked[inv] == 0 {
				t.Errorf("invariant %s checked nothing:\n%s", inv, buf.String())
			}
		}
		t.Logf("clean report:\n%s", buf.String())
		for _, inv := range Invariants {
			if !strings.Contains(buf.String(), inv+" ") {
				t.Errorf("report table lacks %s:\n%s", inv, buf.String())
			}
		}
		if rep.Unreferenced != 0 {
			t.Errorf("%d succeeded runs have no reference output", rep.Unreferenced)
		}
		if rep.Runs < 6 || rep.Steps < 8 {
			t.Errorf("runs %d, steps %d: fewer than the workload made", rep.Runs, rep.Steps)
		}
	})

	// Real protection off: the same MayWait without the run left waiting
	// on purpose: a parked run is no longer legitimate.
	t.Run(InvariantTerminal, func(t *testing.T) {
		in := w.input()
		in.MayWait = nil
		wantViolation(t, check(t, in), InvariantTerminal, w.waiting)
	})

	// Real protection off: a request with the logged key and fencing token
	// of the service_call sent again (a stale worker). The fencing service
	// refuses it and the log stays clean; a service that does not fence
	// accepts it, and the checker reports the unfenced repeat.
	t.Run(InvariantEffectFenced, func(t *testing.T) {
		log := w.svc.log()
		if len(log) != 1 || !log[0].Accepted || log[0].RunID != w.effect {
			t.Fatalf("effect log %+v", log)
		}
		if code := w.svc.resend(t, log[0]); code != http.StatusConflict {
			t.Fatalf("fencing service answered the stale repeat %d", code)
		}
		if rep := check(t, w.input()); rep.Count(InvariantEffectFenced) != 0 {
			t.Fatalf("refused repeat reported: %+v", rep.Violations)
		}
		w.svc.mu.Lock()
		w.svc.fence = false
		w.svc.mu.Unlock()
		if code := w.svc.resend(t, log[0]); code != http.StatusOK {
			t.Fatalf("unfenced service answered %d", code)
		}
		wantViolation(t, check(t, w.input()), InvariantEffectFenced, w.effect)
	})

	// Corrupted record: a log entry of the effect run whose key names
	// another run's step (what a mixed-up key would send).
	t.Run(InvariantEffectFenced+"/foreign_key", func(t *testing.T) {
		in := w.input()
		in.Effects = append(in.Effects, Effect{Seq: int64(len(in.Effects) + 1), RunID: w.effect, Key: w.calc[0] + "//a", Epoch: 1, Accepted: true})
		rep := check(t, in)
		wantViolation(t, rep, InvariantEffectFenced, w.effect)
		found := false
		for _, v := range rep.Violations {
			found = found || v.Invariant == InvariantEffectFenced && v.RunID == w.effect && strings.Contains(v.Detail, "key \""+w.calc[0]+"//a\", not one of its own run")
		}
		if !found {
			t.Fatalf("no violation names the foreign key: %+v", rep.Violations)
		}
	})

	// Real protection off: a run of calc by an engine whose store has no
	// mirror hook, so its writes never reach the outbox or the warm store.
	t.Run(InvariantWarmEqualsCold, func(t *testing.T) {
		ctx := context.Background()
		bare, err := pgstore.Open(ctx, pgstore.Config{URL: pgtest.URL(), Schema: w.schema})
		if err != nil {
			t.Fatal(err)
		}
		defer bare.Close()
		eng, err := starflow.New(starflow.Config{Store: bare, WakeKeys: wakeKeys, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if err := eng.Start(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := eng.Enqueue(ctx, "calc", map[string]any{"n": 1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		done, err := eng.WaitRun(wctx, r.ID)
		if err := eng.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		if err != nil || done.Status != starflowtype.RunSucceeded {
			t.Fatalf("unmirrored run: %+v, %v", done, err)
		}
		rep := check(t, w.input())
		wantViolation(t, rep, InvariantWarmEqualsCold, r.ID)
		if rep.Count(InvariantOutputReference) != 0 {
			t.Fatalf("unmirrored run's output differs: %+v", rep.Violations)
		}
	})

	// Corrupted record: a running claim with a lease that expired a minute
	// ago (what a worker killed without releasing leaves behind).
	t.Run(InvariantLease, func(t *testing.T) {
		w.exec(t, `UPDATE workflow_runs SET status = 'running', claim_state = 'running', leased_by = 'killed',
			lease_until = now() - interval '1 minute' WHERE id = $1`, w.calc[0])
		rep := check(t, w.input())
		wantViolation(t, rep, InvariantLease, w.calc[0])
		wantViolation(t, rep, InvariantTerminal, w.calc[0])
	})

	// Corrupted record: a second node_complete event for step b of calc[1].
	t.Run(InvariantCheckpointOnce, func(t *testing.T) {
		w.exec(t, `INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
			SELECT run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json FROM workflow_run_events
			WHERE run_id = $1 AND event_type = 'node_complete' AND node_id = 'b'`, w.calc[1])
		wantViolation(t, check(t, w.input()), InvariantCheckpointOnce, w.calc[1])
	})

	// Corrupted record: the consumed wait of the signalled run reset to
	// pending, and separately its wake recorded twice.
	t.Run(InvariantWakeOnce, func(t *testing.T) {
		w.exec(t, `UPDATE workflow_waits SET status = 'pending', consumed_at = NULL WHERE run_id = $1`, w.signalled)
		wantViolation(t, check(t, w.input()), InvariantWakeOnce, w.signalled)
		w.exec(t, `UPDATE workflow_waits SET status = 'woken', consumed_at = now() WHERE run_id = $1`, w.signalled)
		if rep := check(t, w.input()); rep.Count(InvariantWakeOnce) != 0 {
			t.Fatalf("restored wait still reported: %+v", rep.Violations)
		}
		w.exec(t, `INSERT INTO workflow_run_events (run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json)
			SELECT run_id, workspace_id, env, attempt, event_type, node_id, scope_path, payload_json FROM workflow_run_events
			WHERE run_id = $1 AND event_type = 'wake_received'`, w.signalled)
		wantViolation(t, check(t, w.input()), InvariantWakeOnce, w.signalled)
	})

	// Corrupted record: a second run for the tick of w.tick (a copy of it
	// with a new id).
	t.Run(InvariantTickOnce, func(t *testing.T) {
		var dup string
		err := w.pool.QueryRow(context.Background(), `INSERT INTO workflow_runs (id, workspace_id, env, definition_id, workflow_name,
			workflow_revision, status, claim_state, trigger_type, idempotency_key, input_json, output_json, completed_at)
			SELECT gen_random_uuid(), workspace_id, env, definition_id, workflow_name, workflow_revision, status, claim_state,
			trigger_type, idempotency_key, input_json, output_json, completed_at FROM workflow_runs WHERE id = $1
			RETURNING id::text`, w.tick).Scan(&dup)
		if err != nil {
			t.Fatal(err)
		}
		wantViolation(t, check(t, w.input()), InvariantTickOnce, dup)
	})

	// Corrupted record: an unapplied mirror_outbox row for the effect run
	// (the engine is stopped, so no drainer applies it).
	t.Run(InvariantOutboxDrained, func(t *testing.T) {
		w.exec(t, `INSERT INTO mirror_outbox (run_id, kind, version, payload) VALUES ($1, 'run', 1, '{}')`, w.effect)
		wantViolation(t, check(t, w.input()), InvariantOutboxDrained, w.effect)
	})

	// Corrupted record: calc[1]'s output changed.
	t.Run(InvariantOutputReference, func(t *testing.T) {
		w.exec(t, `UPDATE workflow_runs SET output_json = '{"x": 3, "y": 7}' WHERE id = $1`, w.calc[1])
		rep := check(t, w.input())
		wantViolation(t, rep, InvariantOutputReference, w.calc[1])
		var buf bytes.Buffer
		rep.Print(&buf)
		if out := buf.String(); !strings.Contains(out, "output_reference run "+w.calc[1]+": ") || !strings.Contains(out, "\n  run "+w.calc[1]+" calc: ") {
			t.Fatalf("printed report lacks the violation or its history:\n%s", out)
		}
	})
}
