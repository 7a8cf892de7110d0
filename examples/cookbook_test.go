package examples_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/examples/services/demo"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
	"github.com/starflow/starflow/workflow"
)

// The cookbook (docs/cookbook.md) is the test's data: every example's
// input and expected output are read from it, so the document and the
// examples cannot drift apart.
const cookbookDoc = "../docs/cookbook.md"

var (
	// cookbookRun is the line before an expected result: "Output of" the
	// run's output, "Error of" the failed run's typed error.
	cookbookRun = regexp.MustCompile("^(Output|Error) of `starflow run (examples/cookbook/[a-z0-9-]+\\.yaml)(?: --input '([^']*)')?`:$")
	// cookbookListing is the line before a YAML listing of an example.
	cookbookListing = regexp.MustCompile("^\\[`(examples/cookbook/[a-z0-9-]+\\.yaml)`\\]\\([^)]*\\):$")
)

// cookbookCase is one "Output of" or "Error of" block of the cookbook.
type cookbookCase struct {
	line  int    // of the "Output of" line, for messages
	file  string // as the cookbook names it: examples/cookbook/NAME.yaml
	input string // the --input JSON; "" when the command has none
	fails bool   // "Error of": the run fails with this error
	want  string // the JSON block
}

// name is the case's subtest name: the example and the line.
func (c cookbookCase) name() string {
	return fmt.Sprintf("%s@L%d", strings.TrimSuffix(filepath.Base(c.file), ".yaml"), c.line)
}

// path is the example's file relative to this package.
func (c cookbookCase) path() string { return strings.TrimPrefix(c.file, "examples/") }

// cookbook reads the document: its cases, and its YAML listings by file.
func cookbook(t *testing.T) ([]cookbookCase, map[string]string) {
	t.Helper()
	f, err := os.Open(cookbookDoc)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// block returns the fenced block of language lang that follows line i
	// (after blank lines), and the index of its closing fence.
	block := func(i int, lang string) (string, int) {
		j := i + 1
		for j < len(lines) && strings.TrimSpace(lines[j]) == "" {
			j++
		}
		if j >= len(lines) || lines[j] != "```"+lang {
			t.Fatalf("%s:%d: a ```%s block must follow", cookbookDoc, i+1, lang)
		}
		var b strings.Builder
		for k := j + 1; k < len(lines); k++ {
			if lines[k] == "```" {
				return b.String(), k
			}
			b.WriteString(lines[k] + "\n")
		}
		t.Fatalf("%s:%d: the ```%s block is not closed", cookbookDoc, j+1, lang)
		return "", 0
	}
	var cases []cookbookCase
	listings := map[string]string{}
	for i := 0; i < len(lines); i++ {
		if m := cookbookRun.FindStringSubmatch(lines[i]); m != nil {
			want, end := block(i, "json")
			cases = append(cases, cookbookCase{line: i + 1, file: m[2], input: m[3], fails: m[1] == "Error", want: want})
			i = end
			continue
		}
		if m := cookbookListing.FindStringSubmatch(lines[i]); m != nil {
			src, end := block(i, "yaml")
			if _, dup := listings[m[1]]; dup {
				t.Errorf("%s:%d: %s is listed twice", cookbookDoc, i+1, m[1])
			}
			listings[m[1]] = src
			i = end
			continue
		}
		if strings.HasPrefix(lines[i], "Output of `") || strings.HasPrefix(lines[i], "Error of `") {
			t.Errorf("%s:%d: %q looks like a case but does not match %s", cookbookDoc, i+1, lines[i], cookbookRun)
		}
	}
	return cases, listings
}

// cookbookFiles lists examples/cookbook/*.yaml (relative to this package).
func cookbookFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("cookbook/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no examples in examples/cookbook")
	}
	return files
}

// withoutHeader is an example's source without its leading comment block:
// what the cookbook lists.
func withoutHeader(src string) string {
	lines := strings.SplitAfter(src, "\n")
	i := 0
	for i < len(lines) && (strings.HasPrefix(lines[i], "#") || strings.TrimSpace(lines[i]) == "") {
		i++
	}
	return strings.Join(lines[i:], "")
}

// TestCookbookDocument checks the cookbook against the examples: every
// example parses as `starflow validate` parses it (no custom step types),
// is listed in the cookbook exactly as its file has it, and has at least
// one case (a child workflow is run through its parent instead).
func TestCookbookDocument(t *testing.T) {
	t.Parallel()
	cases, listings := cookbook(t)
	ran := map[string]bool{}
	for _, c := range cases {
		ran[c.path()] = true
	}
	for _, f := range cookbookFiles(t) {
		def, err := workflow.ParseFile(f, workflow.ParseOptions{})
		if err != nil {
			t.Errorf("%s does not validate:\n%v", f, err)
			continue
		}
		if err := starflow.Supported(f, def); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		listed, ok := listings["examples/"+f]
		switch {
		case !ok:
			t.Errorf("the cookbook does not list examples/%s", f)
		case listed != withoutHeader(string(src)):
			t.Errorf("the cookbook's listing of examples/%s differs from the file (below its comment header):\n--- cookbook\n%s\n--- file\n%s", f, listed, withoutHeader(string(src)))
		}
		if !ran[f] && !strings.HasSuffix(f, "-child.yaml") {
			t.Errorf("the cookbook has no \"Output of `starflow run examples/%s …`\" case", f)
		}
		delete(listings, "examples/"+f)
	}
	for f := range listings {
		t.Errorf("the cookbook lists %s, which is not a file", f)
	}
	if len(cases) < 8 {
		t.Errorf("%d cases in the cookbook, want one or more per pattern", len(cases))
	}
}

// TestCookbook runs every case of the cookbook through the real engine
// and compares the run's output (or typed error) with the cookbook's, as
// JSON. Examples that call services get the in-process demo services'
// address as base_url. Where a pattern is about retries, cancellation or
// waits, the ledger is checked too (cookbookChecks).
func TestCookbook(t *testing.T) {
	t.Parallel()
	cases, _ := cookbook(t)
	h := newCookbookHarness(t)
	ctx := context.Background()
	// Every example is applied first: a parent's workflow_call finds its
	// child applied.
	defs := map[string]*workflow.Definition{}
	revs := map[string]string{}
	for _, f := range cookbookFiles(t) {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		applied, err := h.eng.Apply(ctx, f, src)
		if err != nil {
			t.Fatalf("apply %s: %v", f, err)
		}
		if defs[f], err = h.eng.Parse(f, src); err != nil {
			t.Fatal(err)
		}
		revs[f] = applied.Revision
	}
	for _, c := range cases {
		t.Run(c.name(), func(t *testing.T) {
			t.Parallel()
			def := defs[c.path()]
			if def == nil {
				t.Fatalf("%s:%d: no such example %s", cookbookDoc, c.line, c.file)
			}
			input := map[string]any{}
			if c.input != "" {
				if err := json.Unmarshal([]byte(c.input), &input); err != nil {
					t.Fatalf("%s:%d: --input is not a JSON object: %v", cookbookDoc, c.line, err)
				}
			}
			if props, _ := def.InputSchema["properties"].(map[string]any); props["base_url"] != nil {
				input["base_url"] = h.url
			}
			run := h.runDef(t, def.Name, revs[c.path()], input)
			if c.fails {
				h.wantStatus(t, run, starflowtype.RunFailed)
				wantJSON(t, fmt.Sprintf("%s:%d: error", cookbookDoc, c.line), run.ErrorDetail, c.want)
				if run.Attempt != 1 {
					t.Errorf("the run failed in attempt %d, want 1: the cookbook says it is not retried", run.Attempt)
				}
			} else {
				h.wantStatus(t, run, starflowtype.RunSucceeded)
				wantJSON(t, fmt.Sprintf("%s:%d: output", cookbookDoc, c.line), run.Output, c.want)
			}
			if check := cookbookChecks[filepath.Base(c.file)]; check != nil {
				check(t, h, run, input)
			}
		})
	}
}

// cookbookChecks are the ledger checks of the patterns that are about
// more than the output, by example file.
var cookbookChecks = map[string]func(t *testing.T, h *harness, run *starflowtype.Run, input map[string]any){
	// fetch is tried until the feed answers, at most 4 times, and only
	// while it answers 503: a 400 is tried once.
	"retry-by-type.yaml": func(t *testing.T, h *harness, run *starflowtype.Run, input map[string]any) {
		failures := int(input["failures"].(float64))
		want := min(failures+1, 4)
		if failures < 0 {
			want = 1
		}
		steps := h.wantSteps(t, run, nil)
		if got := steps["fetch"].Tries; got != want {
			t.Errorf("fetch was tried %d times, want %d", got, want)
		}
		if n := h.countEvents(t, run, starflowtype.EventNodeRetry); n != want-1 {
			t.Errorf("%d node_retry events, want %d", n, want-1)
		}
	},
	// The mirror wins; the primary's request was in flight (the test's
	// server holds it) and its step is recorded cancelled.
	"parallel-race.yaml": func(t *testing.T, h *harness, run *starflowtype.Run, _ map[string]any) {
		steps := h.wantSteps(t, run, map[string]starflowtype.StepStatus{
			"get_user": starflowtype.StepSucceeded, "get_stock": starflowtype.StepSucceeded,
			"ask_mirror": starflowtype.StepSucceeded, "ask_primary": starflowtype.StepCancelled,
			"feed": starflowtype.StepSucceeded,
		})
		if p := steps["ask_primary"]; p != nil && !strings.Contains(p.Error, "lane mirror won the race") {
			t.Errorf("ask_primary's error = %q, want the race's cancellation", p.Error)
		}
	},
	// Two durable timer waits, both fired: the first a second after it
	// was registered, the second at one second after input.ordered_at.
	"wait-timer.yaml": func(t *testing.T, h *harness, run *starflowtype.Run, input map[string]any) {
		waits, err := h.store.ListWaits(context.Background(), &state.ListWaitsParams{RunID: run.ID})
		if err != nil {
			t.Fatal(err)
		}
		byStep := map[string]*starflowtype.Wait{}
		for _, w := range waits {
			if w.Kind != starflowtype.WaitTimer || w.Status != starflowtype.WaitWoken {
				t.Errorf("wait %s of %s: %s %s, want a woken timer", w.ID, w.StepID, w.Kind, w.Status)
			}
			byStep[w.StepID] = w
		}
		if len(waits) != 2 || byStep["cool_down"] == nil || byStep["not_before"] == nil {
			t.Fatalf("waits %v, want one of cool_down and one of not_before", waits)
		}
		cool := byStep["cool_down"]
		if d := cool.WakeAt.Sub(cool.CreatedAt); d < 990*time.Millisecond || d > 1010*time.Millisecond {
			t.Errorf("cool_down's timer is due %s after it was registered, want 1s", d)
		}
		if cool.ConsumedAt.Before(cool.WakeAt) {
			t.Errorf("cool_down fired at %v, before it was due at %v", cool.ConsumedAt, cool.WakeAt)
		}
		at, err := time.Parse(time.RFC3339, input["ordered_at"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if nb := byStep["not_before"]; !nb.WakeAt.Equal(at.Add(time.Second)) {
			t.Errorf("not_before is due at %v, want %v", nb.WakeAt, at.Add(time.Second))
		}
	},
	// The child run is the parent's, and ends as the parent's output says.
	"sub-workflow.yaml": func(t *testing.T, h *harness, run *starflowtype.Run, _ map[string]any) {
		children, err := h.store.ListRuns(context.Background(), &state.ListRunsParams{ParentRunID: run.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(children) != 1 {
			t.Fatalf("%d child runs, want 1", len(children))
		}
		child := children[0]
		if child.WorkflowName != "cookbook-address-check" {
			t.Errorf("the child is a run of %s, want cookbook-address-check", child.WorkflowName)
		}
		shipTo, _ := outputOf(t, run)["ship_to"].(map[string]any)
		if _, caught := shipTo["needs_fix"]; caught {
			if child.Status != starflowtype.RunFailed {
				t.Errorf("child status %s, want failed", child.Status)
			}
			var cause starflowtype.ErrorInfo
			if err := json.Unmarshal(child.ErrorDetail, &cause); err != nil || cause.Type != "AddressInvalid" {
				t.Errorf("child error %s, want type AddressInvalid", child.ErrorDetail)
			}
			h.wantSteps(t, run, map[string]starflowtype.StepStatus{
				"check_address": starflowtype.StepFailed, "ask_customer": starflowtype.StepSucceeded,
			})
		} else if child.Status != starflowtype.RunSucceeded {
			t.Errorf("child status %s, want succeeded", child.Status)
		}
	},
	// A catch_when that declines leaves the catch unrun.
	"catch-by-type.yaml": func(t *testing.T, h *harness, run *starflowtype.Run, input map[string]any) {
		steps := h.wantSteps(t, run, nil)
		_, handled := steps["handle"]
		if want := input["gateway"] == "insufficient_funds" || input["gateway"] == "card_declined"; handled != want {
			t.Errorf("gateway %v: the catch ran: %v, want %v", input["gateway"], handled, want)
		}
	},
}

// wantJSON compares got (a JSON document) with want structurally.
func wantJSON(t *testing.T, what string, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: the cookbook's block is not JSON: %v\n%s", what, err, want)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: %s is not JSON: %v", what, got, err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("%s differs from the cookbook\n--- got\n%s\n--- cookbook\n%s", what, gi, wi)
	}
}

// runDef enqueues a run of revision of workflow name and waits for it.
func (h *harness) runDef(t *testing.T, name, revision string, input map[string]any) *starflowtype.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	run, err := h.eng.Enqueue(ctx, name, input, &starflow.EnqueueOptions{Revision: revision})
	if err != nil {
		t.Fatalf("enqueue %s: %v", name, err)
	}
	final, err := h.eng.WaitRun(ctx, run.ID)
	if err != nil {
		t.Fatalf("wait for run %s of %s: %v", run.ID, name, err)
	}
	return final
}

// newCookbookHarness is newHarness with maintenance (its timer poller
// fires the wait example's timers, polling every 20 ms) and the demo
// services behind raceFeed.
func newCookbookHarness(t *testing.T) *harness {
	t.Helper()
	logs := &syncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("engine and services log:\n%s", logs.String())
		}
	})
	svc := demo.New(demo.Config{Log: log.New(logs, "services: ", log.Lmicroseconds)})
	srv := httptest.NewServer(&raceFeed{next: svc, arrived: map[string]chan struct{}{}})
	t.Cleanup(srv.Close)

	ctx := context.Background()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "starflow.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	if err := store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	eng, err := starflow.New(starflow.Config{
		Store:           store,
		Maintenance:     true,
		WaitMaintenance: starflow.WaitMaintenanceConfig{TimerInterval: 20 * time.Millisecond},
		RunRetryMin:     50 * time.Millisecond,
		Logger:          slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = eng.Stop(stop)
	})
	return &harness{svc: svc, url: srv.URL, store: store, eng: eng}
}

// raceFeed serves the demo services, deciding parallel-race.yaml's race
// the same way every time: the primary's request (step ask_primary) is
// held until the race cancels it, and the mirror's (ask_mirror) is
// answered only once the primary's request of the same run has arrived —
// so the mirror wins, and the primary is in flight when it loses. With
// the demo services alone the mirror wins too, by a second.
type raceFeed struct {
	next    http.Handler
	mu      sync.Mutex
	arrived map[string]chan struct{} // by run id: closed when the primary's request arrived
}

func (rf *raceFeed) primary(runID string) chan struct{} {
	rf.mu.Lock()
	defer rf.mu.Unlock()
	ch, ok := rf.arrived[runID]
	if !ok {
		ch = make(chan struct{})
		rf.arrived[runID] = ch
	}
	return ch
}

func (rf *raceFeed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Idempotency-Key: <run_id>/<scope_path>/<step_id>
	key := r.Header.Get("Idempotency-Key")
	runID, _, _ := strings.Cut(key, "/")
	switch {
	case strings.HasSuffix(key, "/ask_primary"):
		ch := rf.primary(runID)
		rf.mu.Lock()
		select {
		case <-ch:
		default:
			close(ch)
		}
		rf.mu.Unlock()
		<-r.Context().Done()
		return
	case strings.HasSuffix(key, "/ask_mirror"):
		select {
		case <-rf.primary(runID):
		case <-r.Context().Done():
			return
		case <-time.After(10 * time.Second):
			http.Error(w, "the primary's request never arrived", http.StatusGatewayTimeout)
			return
		}
	}
	rf.next.ServeHTTP(w, r)
}
