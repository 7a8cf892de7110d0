// Package e2e drives the operator dashboard in a real headless Chromium
// (Debian's chromium package, through chromedp) against a real engine
// on a SQLite file (the runs-page benchmark: PostgreSQL), served by the
// same handler `starflow dev` and `starflow server` use.
package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/warm/memory"
)

// Workflows the tests apply.
const (
	// approvalWF parks on an approval whose form has a rendered title,
	// a required boolean and a text field.
	approvalWF = `name: expense
input_schema:
  type: object
  required: [amount]
  properties:
    amount: {type: number}
steps:
  - id: prepare
    context_set: {amount: "${{ input.amount }}"}
  - id: manager
    wait:
      approval:
        signal: decision
        form:
          title: "${{ 'Expense of ' + string(input.amount) }}"
          fields:
            approved: {type: boolean, label: Approve the expense, required: true}
            comment: {type: string, label: Comment}
      timeout: 1h
  - id: record
    context_set: {approved: "${{ steps.manager.output.approved }}"}
output: "${{ {'approved': variables.approved, 'comment': steps.manager.output.comment} }}"
`
	// fanWF runs a for_each inside each lane of a parallel; the last
	// item of lane b fails, so the run fails with the rest succeeded.
	fanWF = `name: fan
max_attempts: 1
steps:
  - id: start
    context_set: {xs: [1, 2, 3]}
  - id: fan
    parallel:
      fail_fast: false
      lanes:
        a:
          - id: each_a
            for_each:
              items: "${{ variables.xs }}"
              steps:
                - id: work_a
                  context_set: {last_a: "${{ item }}"}
        b:
          - id: each_b
            for_each:
              items: "${{ variables.xs }}"
              steps:
                - id: work_b
                  when: "${{ item != 3 }}"
                  context_set: {last_b: "${{ item }}"}
                - id: check_b
                  when: "${{ item == 3 }}"
                  fail: {message: "item 3 is refused"}
  - id: report
    run_after: [fan]
    context_set: {done: true}
  - id: audit
    run_after: [start]
    context_set: {audited: true}
`
	// holdWF waits for a signal.
	holdWF = `name: hold
steps:
  - id: first
    context_set: {seen: true}
  - id: gate
    wait: {signal: go, timeout: 1h}
`
	// progressWF's step reports progress and waits for env.release.
	progressWF = `name: progress
steps:
  - id: crunch
    halfway: {}
`
	// boomWF fails with no attempts left: a dead letter.
	boomWF = `name: boom
max_attempts: 1
steps:
  - id: a
    context_set: {x: 1}
  - id: b
    explode: {}
    retry_policy: {max_attempts: 1}
`
)

// env is a real engine (runner included, memory warm tier) on a SQLite
// file behind the listener's handler, served by httptest.
type env struct {
	t     *testing.T
	url   string
	eng   *starflow.Engine
	store state.Adapter
	// release ends the halfway steps (progressWF).
	release func()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "dash.db"), Hooks: []state.TxHook{mirror.Hook()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctx := context.Background()
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{Store: store, Workspace: "alpha", Warm: memory.New(),
		WakeKeys:     "k1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)),
		PollInterval: 20 * time.Millisecond, RunRetryMin: 10 * time.Millisecond, RunRetryMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.RegisterStep("explode", func(context.Context, *step.Request) (any, error) {
		return nil, errors.New("exploded on purpose")
	}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	if err := eng.RegisterStep("halfway", func(ctx context.Context, req *step.Request) (any, error) {
		req.Progress(0.5, "half way there")
		select {
		case <-release:
			return map[string]any{"done": true}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{approvalWF, fanWF, holdWF, boomWF, progressWF} {
		if _, err := eng.Apply(ctx, "wf.yaml", []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = eng.Stop(sctx)
	})
	h, err := httpserver.New(httpserver.Config{Backend: eng, API: &httpserver.APIConfig{Engine: eng, Rate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	var once sync.Once
	stop := func() { once.Do(func() { close(release) }) }
	t.Cleanup(stop) // before the engine stops (cleanups run last first)
	return &env{t: t, url: srv.URL, eng: eng, store: store, release: stop}
}

// key creates an API key of role and returns its text.
func (e *env) key(role starflowtype.Role) string {
	e.t.Helper()
	secret, hash := apikey.New()
	if _, err := e.store.CreateAPIKey(context.Background(), &state.CreateAPIKeyParams{
		WorkspaceID: "alpha", Role: role, Name: "e2e-" + string(role), KeyHash: hash,
	}); err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// enqueue starts a run of name with input (JSON) and returns its id.
func (e *env) enqueue(name, input string) string {
	e.t.Helper()
	r, err := e.eng.Enqueue(context.Background(), name, []byte(input), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return r.ID
}

// waitStatus waits until the run's status is want.
func (e *env) waitStatus(id string, want starflowtype.RunStatus) *starflowtype.Run {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := e.store.GetRun(context.Background(), &state.GetRunParams{ID: id})
		if err != nil {
			e.t.Fatal(err)
		}
		// A paused run is waited for parked: it is paused (commit 1) before
		// its wait row is written (commit 3; internal/engine/waits.go).
		if r.Status == want && (want != starflowtype.RunPaused || r.ClaimState == starflowtype.ClaimParked) {
			return r
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("run %s is %s, want %s", id, r.Status, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// chromium is the browser binary: $STARFLOW_CHROMIUM, or Debian's.
func chromium(t testing.TB) string {
	t.Helper()
	for _, p := range []string{os.Getenv("STARFLOW_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("Chromium is not installed: CI needs it for the dashboard tests (.ci/run installs Debian's chromium)")
	}
	t.Skip("Chromium is not installed (apt-get install chromium); the dashboard's browser tests need it")
	return ""
}

// browser is a new headless Chromium tab; JavaScript exceptions and
// console errors on its pages fail the test.
func browser(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		cancelB()
		cancelA()
		t.Fatalf("starting Chromium: %v", err)
	}
	var mu sync.Mutex
	var problems []string
	done := make(chan struct{})
	msgs := chromedp.Console(ctx)
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleException || (m.Type == chromedp.ConsoleError && m.Source == "") {
				mu.Lock()
				problems = append(problems, m.String())
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancelB()
		cancelA()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, p := range problems {
			t.Errorf("the page logged %s", p)
		}
	})
	return ctx
}

// run runs actions with a deadline, failing the test with what it was
// doing.
func run(t testing.TB, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		loc, _ := chromedp.Run(ctx, chromedp.Location())
		shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('main').innerText.slice(0, 600)`))
		t.Fatalf("%s: %v (page %s shows %q)", what, err, loc, shown)
	}
}

// eval evaluates a JavaScript expression, decoding its value into T.
func eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// updateScreenshots makes screenshot write the repository's
// docs/screenshots (go test ./internal/dashboard/e2e -update-screenshots);
// without it the pictures go to a temporary directory, so a test run
// leaves the working tree as it found it.
var updateScreenshots = flag.Bool("update-screenshots", false, "write the screenshots to docs/screenshots")

// screenshotDir is docs/screenshots of the repository (go test runs a
// package's tests in its source directory) with -update-screenshots, a
// temporary directory of t's otherwise.
func screenshotDir(t testing.TB) string {
	if !*updateScreenshots {
		return t.TempDir()
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..", "..", "docs", "screenshots")
}

// screenshot saves the whole page as NAME.png in screenshotDir: a PNG
// of the page as rendered, or the test fails.
func screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("screenshot %s: not a PNG (%d bytes)", name, len(png))
	}
	dir := screenshotDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// css is a CSS selector for chromedp.
func css(format string, args ...any) chromedp.CSS { return chromedp.CSS(fmt.Sprintf(format, args...)) }

// signIn opens the runs page, is sent to sign in, and signs in with
// key (again is true when a key is already signed in: it opens the
// sign-in page itself).
func signIn(t testing.TB, ctx context.Context, base, key string, again ...bool) {
	t.Helper()
	page := base + "/runs"
	if len(again) > 0 && again[0] {
		page = base + "/sign-in?next=/runs"
	}
	run(t, ctx, "sign in",
		chromedp.Navigate(page),
		chromedp.WaitVisible(css(`#key`)),
		chromedp.SendKeys(css(`#key`), key),
		chromedp.Submit(css(`#key`)),
		chromedp.WaitVisible(css(`main[data-ready="runs"]`)))
}

// text is the text of the first element matching sel.
func text(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// count is how many elements match sel now.
func count(t testing.TB, ctx context.Context, sel string) int {
	t.Helper()
	return eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}
