package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/state/sqlitestore"
)

// remoteFixture is a SQLite store with API keys and a `starflow server`
// serving it: every command can be run on the store (local) and through
// the server (remote) and the two compared.
type remoteFixture struct {
	dir, url             string
	admin, viewer, other string // keys: admin and viewer of workspace default, admin of workspace other
}

// newRemoteFixture creates the store with `keys create` (on a file that
// does not exist yet) and starts the server on a free loopback port.
func newRemoteFixture(t *testing.T) *remoteFixture {
	t.Helper()
	f := &remoteFixture{dir: t.TempDir()}
	f.admin = f.createKey(t, "ops", "admin", "default")
	f.viewer = f.createKey(t, "dashboard", "viewer", "default")
	f.other = f.createKey(t, "tenant-b", "admin", "other")
	srv := startDaemon(t, f.dir, nil, "server", "--db", "t.db", "--addr", "127.0.0.1:0")
	f.url = srv.waitStarted(t)
	if f.url == "" {
		t.Fatal("the server printed no listening address")
	}
	return f
}

// createKey runs `keys create` on the store and returns the key it
// printed alone on stdout.
func (f *remoteFixture) createKey(t *testing.T, name, role, workspace string) string {
	t.Helper()
	r := f.local(t, "keys", "create", "--name", name, "--role", role, "--workspace", workspace)
	key := strings.TrimSuffix(r.stdout, "\n")
	if r.code != 0 || !apikey.WellFormed(key) || !strings.Contains(r.stderr, "created API key ") {
		t.Fatalf("keys create: exit %d, stdout %q, stderr %q; want the key alone on stdout", r.code, r.stdout, r.stderr)
	}
	return key
}

func (f *remoteFixture) local(t *testing.T, args ...string) result {
	t.Helper()
	return starflowCmd(t, f.dir, nil, append(args, "--db", "t.db")...)
}

func (f *remoteFixture) remote(t *testing.T, key string, args ...string) result {
	t.Helper()
	return starflowCmd(t, f.dir, []string{envAPIKey + "=" + key}, append(args, "--server", f.url)...)
}

// same runs args on the store and through the server (admin key) and
// wants the same stdout and exit status; stderr too when withStderr
// (after the place each names is made the same).
func (f *remoteFixture) same(t *testing.T, withStderr bool, args ...string) result {
	t.Helper()
	l, r := f.local(t, args...), f.remote(t, f.admin, args...)
	le := strings.ReplaceAll(l.stderr, " --db t.db", " --server "+f.url)
	le = strings.ReplaceAll(le, "in this store", "on the server at "+f.url)
	if l.code != r.code || l.stdout != r.stdout || withStderr && le != r.stderr {
		t.Errorf("starflow %s: local and remote differ\nlocal exit %d, stdout:\n%s\nstderr:\n%s\nremote exit %d, stdout:\n%s\nstderr:\n%s",
			strings.Join(args, " "), l.code, l.stdout, l.stderr, r.code, r.stdout, r.stderr)
	}
	return l
}

var uuidText = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// shape is s with each distinct uuid replaced by <1>, <2>, … in the
// order they first appear: two commands that did the same to different
// runs print the same shape.
func shape(s string) string {
	seen := map[string]string{}
	return uuidText.ReplaceAllStringFunc(s, func(id string) string {
		if _, ok := seen[id]; !ok {
			seen[id] = fmt.Sprintf("<%d>", len(seen)+1)
		}
		return seen[id]
	})
}

// sameShape wants a local and a remote command that acted on different
// runs to print the same thing but for the ids, with the same status.
func sameShape(t *testing.T, what string, l, r result) {
	t.Helper()
	if l.code != r.code || shape(l.stdout) != shape(r.stdout) {
		t.Errorf("%s: local and remote differ\nlocal exit %d, stdout:\n%s\nstderr:\n%s\nremote exit %d, stdout:\n%s\nstderr:\n%s",
			what, l.code, l.stdout, l.stderr, r.code, r.stdout, r.stderr)
	}
}

func mustCode(t *testing.T, what string, r result, code int, stderr string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stderr, stderr) {
		t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", what, r.code, r.stderr, code, stderr)
	}
}

// tokenSink records the wake tokens notify requests carry, by run.
type tokenSink struct {
	srv    *httptest.Server
	mu     sync.Mutex
	tokens map[string]string
}

func newTokenSink(t *testing.T) *tokenSink {
	s := &tokenSink{tokens: map[string]string{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			RunID string `json:"run_id"`
			Token string `json:"token"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		s.mu.Lock()
		s.tokens[body.RunID] = body.Token
		s.mu.Unlock()
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *tokenSink) token(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[id]
}

const remoteManual = "name: manual\nrecovery_mode: manual\nsteps:\n  - id: a\n    context_set: {x: 1}\n  - id: b\n    fail: {message: stop here}\n"

const remoteApproval = `name: approval
steps:
  - id: prepare
    context_set: {asked: true}
  - id: ask
    wait:
      signal: approve
      notify: {url: "%s"}
output: "${{ steps.ask.output }}"
`

// TestCLIRemoteMatchesLocal (issue: the CLI through the HTTP API): every
// command that reads or steers runs prints the same, with the same exit
// status, on the store and through `starflow server` with an API key:
// apply, validate, plan, enqueue (idempotent too), runs list, show,
// ledger, events and waits (by id and by id prefix, tables and JSON),
// resume, cancel, retrigger (on twin runs), the refusal of a paused run,
// signal, wake (a token once, then closed, then tampered) and keys list.
func TestCLIRemoteMatchesLocal(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	sink := newTokenSink(t)
	writeFile(t, f.dir, "three.yaml", threeSteps)
	writeFile(t, f.dir, "manual.yaml", remoteManual)
	writeFile(t, f.dir, "approval.yaml", fmt.Sprintf(remoteApproval, sink.srv.URL))
	writeFile(t, f.dir, "bad.yaml", "name: bad\nsteps:\n  - id: a\n    context_set: {x: 1}\n    colour: red\n")
	writeFile(t, f.dir, "first.yaml", "name: first\nrecovery_mode: manual\nsteps:\n  - id: boom\n    fail: {message: at once}\n")

	// Definitions: the second apply of each is the same revision.
	for _, file := range []string{"three.yaml", "manual.yaml", "approval.yaml", "first.yaml"} {
		f.same(t, true, "apply", file)
	}
	f.same(t, true, "validate", "three.yaml", "bad.yaml", "approval.yaml")
	f.same(t, true, "apply", "bad.yaml")
	f.same(t, true, "plan", "three.yaml")
	f.same(t, true, "enqueue", "no-such-workflow")

	// Runs: twins, one enqueued each way.
	enqueue := func(name string, args ...string) (local, remote string) {
		t.Helper()
		args = append([]string{"enqueue", name}, args...)
		l, r := f.local(t, args...), f.remote(t, f.admin, args...)
		sameShape(t, strings.Join(args, " "), l, r)
		return strings.TrimSpace(l.stdout), strings.TrimSpace(r.stdout)
	}
	threeL, threeR := enqueue("three", "--input", `{"n": 21}`)
	manualL, manualR := enqueue("manual")
	signalL, signalR := enqueue("approval")
	wakeL, wakeR := enqueue("approval")
	pausedL, _ := enqueue("approval")
	firstL, _ := enqueue("first")
	manualX, _ := enqueue("manual")
	keyL, keyR := enqueue("three", "--idempotency-key", "order-7")
	if l, r := f.local(t, "enqueue", "three", "--idempotency-key", "order-7"), f.remote(t, f.admin, "enqueue", "three", "--idempotency-key", "order-7"); strings.TrimSpace(l.stdout) != keyL || strings.TrimSpace(r.stdout) != keyR {
		t.Errorf("idempotent repeats: local %q (first %s), remote %q (first %s)", l.stdout, keyL, r.stdout, keyR)
	}

	// A worker runs them until each ends or parks, then stops: what
	// follows reads and steers runs nobody executes.
	worker := startDaemon(t, f.dir, nil, "worker", "--db", "t.db", "--poll-interval", "20ms")
	want := map[string]string{threeL: "succeeded", threeR: "succeeded", manualL: "failed", manualR: "failed",
		signalL: "paused", signalR: "paused", wakeL: "paused", wakeR: "paused", pausedL: "paused", firstL: "failed", manualX: "failed"}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var runs []struct{ ID, Status string }
		list := f.local(t, "runs", "list", "--json", "--limit", "100")
		if err := json.Unmarshal([]byte(list.stdout), &runs); err != nil {
			t.Fatalf("runs list --json: %v\n%s%s", err, list.stdout, list.stderr)
		}
		done := 0
		for _, r := range runs {
			if want[r.ID] == r.Status && (r.Status != "paused" || sink.token(r.ID) != "") {
				done++
			}
		}
		if done == len(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runs did not reach %v (and a token for each paused one):\n%s", want, list.stdout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	worker.stop(t)

	// Reads: the same run, both ways.
	f.same(t, true, "runs", "list")
	f.same(t, true, "runs", "list", "--json")
	f.same(t, true, "runs", "list", "--status", "paused,failed", "--workflow", "approval")
	f.same(t, true, "runs", "list", "--limit", "2")
	for _, id := range []string{threeL, manualR, pausedL} {
		for _, ref := range []string{id, id[:8], strings.ToUpper(id[:13])} {
			for _, sub := range []string{"show", "ledger", "events", "waits"} {
				f.same(t, true, "runs", sub, ref)
			}
		}
		for _, sub := range [][]string{{"show"}, {"ledger"}, {"events"}, {"waits"}, {"ledger", "--attempt", "1"}, {"events", "--after", "2"}, {"waits", "--limit", "1"}} {
			f.same(t, true, append(append([]string{"runs"}, sub...), id, "--json")...)
		}
	}
	f.same(t, true, "runs", "show", "00000000")
	f.same(t, true, "runs", "show", "no-such-run")
	f.same(t, true, "plan", "approval.yaml") // the paused runs are in flight

	// Operator actions on twin runs; a refused one on the same run.
	for _, c := range []struct {
		args []string
		code int
	}{{[]string{"resume"}, 0}, {[]string{"cancel"}, 0}, {[]string{"cancel"}, 1}, {[]string{"retrigger"}, 0}} {
		args := append([]string{"runs"}, c.args...)
		l, r := f.local(t, append(args, manualL)...), f.remote(t, f.admin, append(args, manualR[:8])...)
		sameShape(t, strings.Join(args, " "), l, r)
		if l.code != c.code || shape(l.stderr) != shape(strings.ReplaceAll(r.stderr, "on the server at "+f.url, "in this store")) {
			t.Errorf("%v: exit %d, stderr local %q remote %q; want exit %d and the same words", c.args, l.code, l.stderr, r.stderr, c.code)
		}
	}
	for _, action := range []string{"resume", "retrigger"} {
		r := f.same(t, true, "runs", action, pausedL)
		mustCode(t, "runs "+action+" of a paused run", r, 1, "is paused at step ask waiting for signal approve")
	}

	// The 409s of resume: no checkpoint, and a revision without the
	// steps the run completed (after the reads: it applies a revision).
	mustCode(t, "resume without a checkpoint", f.same(t, true, "runs", "resume", firstL), 1, "no_checkpoint: ")
	writeFile(t, f.dir, "manual2.yaml", strings.Replace(remoteManual, "id: a\n", "id: a2\n", 1))
	f.same(t, true, "apply", "manual2.yaml")
	mustCode(t, "resume onto a revision without its steps", f.same(t, true, "runs", "resume", manualX, "--revision", "current"), 1, "revision_mismatch: ")

	// Signals: one twin each way; to an ended run, refused alike; by
	// correlation key, held alike.
	sameShape(t, "signal", f.local(t, "signal", signalL, "approve", "--payload", `{"ok": true}`),
		f.remote(t, f.admin, "signal", signalR[:8], "approve", "--payload", `{"ok": true}`))
	f.same(t, true, "signal", threeL, "approve")
	sameShape(t, "signal --correlation-key", f.local(t, "signal", "--correlation-key", "order-9", "nobody"),
		f.remote(t, f.admin, "signal", "--correlation-key", "order-9", "nobody"))
	f.same(t, true, "signal", pausedL, "approve", "--payload", "{nope")

	// Wake: a token each way, then both used up, then tampered.
	tokL, tokR := sink.token(wakeL), sink.token(wakeR)
	sameShape(t, "wake", f.local(t, "wake", tokL, "--payload", `{"ok": 1}`), f.remote(t, f.admin, "wake", tokR, "--payload", `{"ok": 1}`))
	for _, tok := range []string{tokL, tokR} {
		mustCode(t, "wake with a used token, local", f.local(t, "wake", tok), exitWaitClosed, "wait closed")
		mustCode(t, "wake with a used token, remote", f.remote(t, "", "wake", tok), exitWaitClosed, "wait closed")
	}
	tampered := tokL[:len(tokL)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(tokL, "AA")]
	mustCode(t, "wake with a tampered token, local", f.local(t, "wake", tampered), exitTokenInvalid, "token invalid")
	mustCode(t, "wake with a tampered token, remote", f.remote(t, "", "wake", tampered), exitTokenInvalid, "token invalid")
	f.same(t, true, "wake", tokL, "--payload", "[1e400]")

	// Reads after the actions: new attempts, a cancellation, woken and
	// consumed waits.
	for _, id := range []string{manualL, signalL, wakeR} {
		for _, sub := range []string{"show", "waits", "events", "ledger"} {
			f.same(t, true, "runs", sub, id, "--json")
		}
		f.same(t, true, "runs", "waits", id)
		f.same(t, true, "runs", "ledger", id, "--attempt", "1")
	}
	f.same(t, true, "runs", "list")

	// Keys of workspace default.
	f.same(t, true, "keys", "list", "--workspace", "default")
	f.same(t, true, "keys", "list", "--workspace", "default", "--json")

	// STARFLOW_SERVER names the server as --server does.
	env := starflowCmd(t, f.dir, []string{envServer + "=" + f.url, envAPIKey + "=" + f.admin}, "runs", "show", threeL)
	if l := f.local(t, "runs", "show", threeL); env.code != 0 || env.stdout != l.stdout {
		t.Errorf("runs show with %s: exit %d\n%s%s\nwant\n%s", envServer, env.code, env.stdout, env.stderr, l.stdout)
	}
}

// TestCLIRemoteKeysAndAuth: keys made, listed and revoked through the
// server and on the store; a revoked key, a missing key, a viewer key
// cancelling and another workspace's key are refused with a sentence
// and exit 1, and nothing changes; an ambiguous id prefix is refused, naming no run
// both ways.
func TestCLIRemoteKeysAndAuth(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	writeFile(t, f.dir, "three.yaml", threeSteps)
	writeFile(t, f.dir, "approval.yaml", fmt.Sprintf(remoteApproval, "http://127.0.0.1:9/unused"))
	f.same(t, true, "apply", "approval.yaml")
	id := strings.TrimSpace(f.remote(t, f.admin, "enqueue", "approval").stdout)
	if len(id) != 36 {
		t.Fatalf("enqueue printed %q", id)
	}

	// A viewer reads, and may not cancel.
	if r := f.remote(t, f.viewer, "runs", "show", id[:8]); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("viewer runs show: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	r := f.remote(t, f.viewer, "runs", "cancel", id)
	mustCode(t, "viewer runs cancel", r, 1, "the API key is not allowed to do this (its role or env is too narrow): POST /api/runs/{id}/cancel needs role operator or higher; the caller has role viewer")
	mustCode(t, "viewer keys list", f.remote(t, f.viewer, "keys", "list"), 1, "needs role admin or higher; the caller has role viewer")
	// Another workspace's key finds no such run, in the words of a store
	// that does not hold it.
	for _, ref := range []string{id, id[:8]} {
		mustCode(t, "runs show with another workspace's key", f.remote(t, f.other, "runs", "show", ref), 1,
			fmt.Sprintf("no run with id %q on the server at %s", ref, f.url))
		mustCode(t, "runs cancel with another workspace's key", f.remote(t, f.other, "runs", "cancel", ref), 1, "no run with id")
	}
	mustCode(t, "no key", f.remote(t, "", "runs", "list"), 1, "needs an API key: set "+envAPIKey)
	mustCode(t, "a malformed key", f.remote(t, "sf_nope", "runs", "list"), 1, "refused the API key")
	if r := f.local(t, "runs", "show", id, "--json"); !strings.Contains(r.stdout, `"status": "queued"`) || !strings.Contains(r.stdout, `"cancel_requested": false`) {
		t.Errorf("the run changed after refused cancels:\n%s", r.stdout)
	}

	// Keys through the server: made in the caller's workspace, listed,
	// used, revoked, refused.
	r = f.remote(t, f.admin, "keys", "create", "--name", "ci", "--role", "operator")
	ci := strings.TrimSuffix(r.stdout, "\n")
	if r.code != 0 || !apikey.WellFormed(ci) || !strings.Contains(r.stderr, "role operator in workspace default (every env), named ci") {
		t.Fatalf("remote keys create: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	ciID := regexp.MustCompile(`created API key (\S+):`).FindStringSubmatch(r.stderr)[1]
	if r := f.remote(t, f.admin, "keys", "create", "--name", "x", "--role", "viewer", "--workspace", "default", "--env", "staging"); r.code != 0 {
		t.Errorf("remote keys create --workspace default: exit %d %s", r.code, r.stderr)
	}
	before := f.local(t, "keys", "list", "--json").stdout
	mustCode(t, "remote keys create in another workspace", f.remote(t, f.admin, "keys", "create", "--name", "y", "--role", "viewer", "--workspace", "other"),
		1, "--workspace other: the API key acts in workspace default")
	mustCode(t, "remote keys list of another workspace", f.remote(t, f.admin, "keys", "list", "--workspace", "other"), 1, "acts in workspace default")
	if after := f.local(t, "keys", "list", "--json").stdout; after != before {
		t.Errorf("a refused keys create wrote a key:\n%s", after)
	}
	mustCode(t, "keys create without --workspace on a store", f.local(t, "keys", "create", "--name", "z", "--role", "admin"), exitUsage, "--workspace is required")
	mustCode(t, "keys create --role root", f.local(t, "keys", "create", "--name", "z", "--role", "root", "--workspace", "w"), exitUsage, `--role "root" is not a valid value: use one of viewer, operator, admin`)
	list := f.same(t, true, "keys", "list", "--workspace", "default")
	if !strings.Contains(list.stdout, ciID) || !strings.Contains(list.stdout, "staging") || strings.Contains(list.stdout, "tenant-b") {
		t.Errorf("keys list --workspace default:\n%s", list.stdout)
	}
	if all := f.local(t, "keys", "list"); !strings.Contains(all.stdout, "tenant-b") {
		t.Errorf("keys list on the store lacks workspace other's key:\n%s", all.stdout)
	}
	if r := f.remote(t, ci, "runs", "cancel", id[:8]); r.code != 0 || !strings.Contains(r.stdout, "run "+id+" is cancelled") {
		t.Errorf("operator key runs cancel: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	if r := f.remote(t, f.admin, "keys", "revoke", ciID); r.code != 0 || !strings.Contains(r.stdout, "API key "+ciID+" (role operator in workspace default (every env), named ci) is revoked since ") {
		t.Errorf("remote keys revoke: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	mustCode(t, "a revoked key", f.remote(t, ci, "runs", "list"), 1, "the API key "+ciID+" was revoked")
	f.same(t, true, "keys", "revoke", ciID) // again: revoked since the first time
	f.same(t, true, "keys", "revoke", "6b9a1c1e-0000-4000-8000-000000000000")
	f.same(t, true, "keys", "revoke", "nope")

	// A key made on the store works through the server until revoked on
	// the store.
	local := f.createKey(t, "laptop", "viewer", "default")
	if r := f.remote(t, local, "runs", "list"); r.code != 0 || !strings.Contains(r.stdout, id) {
		t.Errorf("a key made on the store: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	localID := regexp.MustCompile(`(?m)^(\S+)\s+default\s+\*\s+viewer\s+laptop\s`).FindStringSubmatch(f.local(t, "keys", "list").stdout)
	if localID == nil {
		t.Fatal("keys list lacks the laptop key")
	}
	if r := f.local(t, "keys", "revoke", localID[1]); r.code != 0 || !strings.Contains(r.stdout, "is revoked since") {
		t.Errorf("local keys revoke: exit %d %s%s", r.code, r.stdout, r.stderr)
	}
	mustCode(t, "a key revoked on the store", f.remote(t, local, "runs", "list"), 1, "was revoked")

	// An id prefix two runs start with is refused both ways, naming neither.
	a, b := "abcdef01-0000-4000-8000-000000000001", "abcdef01-0000-4000-8000-000000000002"
	enqueueWithIDs(t, f.dir+"/t.db", "three", threeSteps, a, b)
	r = f.same(t, true, "runs", "show", "abcdef01")
	mustCode(t, "ambiguous prefix", r, 1, `run id prefix "abcdef01" is ambiguous: give more of the id`)
	if r := f.same(t, true, "runs", "show", "abcdef01-0000-4000-8000-0000000000"); r.code != 1 {
		t.Errorf("a longer prefix both still start: exit %d", r.code)
	}
	f.same(t, true, "runs", "show", "ABCDEF01-0000-4000-8000-000000000002")
}

// enqueueWithIDs applies src and enqueues runs of it with the given ids,
// in this process (the CLI chooses no id).
func enqueueWithIDs(t *testing.T, db, name, src string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlitestore.Open(sqlitestore.Config{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := starflow.New(starflow.Config{Store: st, NoRunner: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Apply(ctx, name+".yaml", []byte(src)); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if _, err := eng.Enqueue(ctx, name, nil, &starflow.EnqueueOptions{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCLIServerFlagRefused: --server on a command that works on a store
// only, beside --db, with a URL that is not http(s), and STARFLOW_SERVER
// beside STARFLOW_DB are usage errors (exit 2, nothing printed on
// stdout); STARFLOW_SERVER alone leaves store-only commands alone; a
// server out of reach is one sentence, exit 1.
func TestCLIServerFlagRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + l.Addr().String()
	l.Close()
	for _, c := range []struct {
		args []string
		env  []string
		want string
	}{
		{[]string{"run", "three.yaml", "--server", down}, nil, "starflow run works on a store only, not through a server: drop --server"},
		{[]string{"dev", "--server", down}, nil, "starflow dev works on a store only"},
		{[]string{"server", "--server", down}, nil, "starflow server works on a store only"},
		{[]string{"worker", "--server", down}, nil, "starflow worker works on a store only"},
		{[]string{"migrate", "--server", down}, nil, "starflow migrate works on a store only"},
		{[]string{"gc", "--server", down}, nil, "starflow gc works on a store only"},
		{[]string{"schema", "--server", down}, nil, "starflow schema works on a store only"},
		{[]string{"runs", "live", "abcdef01", "--server", down}, nil, "starflow runs live reads the warm tier, never a server: drop --server (the server itself answers GET " + down + "/live/runs/ID)"},
		{[]string{"runs", "list", "--server", down, "--db", "x.db"}, nil, "--server and --db both name where starflow runs list acts: give one"},
		{[]string{"runs", "list", "--server", "127.0.0.1:8480"}, nil, `server "127.0.0.1:8480": want the server's URL, http://HOST:PORT or https://HOST:PORT`},
		{[]string{"runs", "list"}, []string{envServer + "=" + down, envDB + "=x.db"}, "STARFLOW_SERVER and STARFLOW_DB are both set"},
	} {
		r := starflowCmd(t, dir, c.env, c.args...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, c.want) {
			t.Errorf("starflow %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), r.code, r.stdout, r.stderr, c.want)
		}
	}
	// STARFLOW_SERVER is ignored by store-only commands, and a flag
	// naming the store wins over it.
	env := []string{envServer + "=" + down}
	if r := starflowCmd(t, dir, env, "run", "three.yaml", "--db", "x.db"); r.code != 0 {
		t.Errorf("run with %s set: exit %d %s", envServer, r.code, r.stderr)
	}
	if r := starflowCmd(t, dir, env, "runs", "list", "--db", "x.db"); r.code != 0 || !strings.Contains(r.stdout, "succeeded") {
		t.Errorf("runs list --db with %s set: exit %d %s%s", envServer, r.code, r.stdout, r.stderr)
	}
	for _, args := range [][]string{{"runs", "list"}, {"validate", "three.yaml"}, {"wake", "tok"}, {"keys", "list"}} {
		r := starflowCmd(t, dir, env, args...)
		if r.code != 1 || r.stdout != "" || !strings.Contains(r.stderr, "cannot reach the server at "+down+": ") {
			t.Errorf("starflow %s with the server down: exit %d, stdout %q, stderr %q; want exit 1, cannot reach the server", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
	}
}
