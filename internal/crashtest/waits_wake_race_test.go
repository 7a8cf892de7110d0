package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// TestConcurrentWakesSameToken (issue 5, Acceptance): 64 goroutines call
// Engine.Wake at once with the same token, each with its own payload —
// half through the engine that runs the run, half through a second engine
// on its own connections to the same file. Exactly one applies; the other
// 63 get ErrWaitClosed and change nothing: one wake_received event, and
// the run's output is the winner's payload.
func TestConcurrentWakesSameToken(t *testing.T) {
	t.Parallel()
	const callers = 64
	dir := t.TempDir()
	db := filepath.Join(dir, "race.db")
	open := func() *sqlitestore.Store {
		s, err := sqlitestore.Open(sqlitestore.Config{Path: db})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		return s
	}
	rec := newNotifyRecorder(t, open())
	keys := "k1:" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWY=" // 32 bytes
	runnerStore := open()
	eng, err := starflow.New(starflow.Config{Store: runnerStore, WakeKeys: keys, PollInterval: 20 * time.Millisecond, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	other, err := starflow.New(starflow.Config{Store: open(), WakeKeys: keys, NoRunner: true, Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := eng.Apply(ctx, "race.yaml", []byte(fmt.Sprintf(`name: race
steps:
  - id: ask
    wait:
      signal: approve
      notify: {url: "%s/hook"}
output: "${{ steps.ask.output }}"
`, rec.srv.URL))); err != nil {
		t.Fatal(err)
	}
	run, err := eng.Enqueue(ctx, "race", map[string]any{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		eng.Stop(sctx)
	}()
	var token string
	waitFor(t, 60*time.Second, "the notify with the token", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.received) > 0 {
			token, _ = rec.received[0]["token"].(string)
		}
		return token != ""
	})
	// Park first, so that the winner also re-queues the run.
	waitFor(t, 30*time.Second, "the run parked", func() bool {
		r, err := runnerStore.GetRun(ctx, &state.GetRunParams{ID: run.ID})
		return err == nil && r.ClaimState == starflowtype.ClaimParked
	})

	var (
		start   = make(chan struct{})
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []int
		others  []error
	)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := eng
			if i%2 == 1 {
				e = other
			}
			<-start
			_, err := e.Wake(ctx, token, json.RawMessage(fmt.Sprintf(`{"caller": %d}`, i)))
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				winners = append(winners, i)
			} else {
				others = append(others, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d wakes applied (callers %v), want exactly 1", len(winners), winners)
	}
	for _, err := range others {
		if !errors.Is(err, starflowtype.ErrWaitClosed) {
			t.Errorf("a losing wake failed with %v, want ErrWaitClosed", err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	done, err := eng.WaitRun(wctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`{"caller":%d}`, winners[0]); done.Status != starflowtype.RunSucceeded || compactJSON(t, done.Output) != want {
		t.Fatalf("run %s with output %s; want succeeded with %s", done.Status, done.Output, want)
	}
	evs, err := runnerStore.ListEvents(ctx, &state.ListEventsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	wakes := 0
	for _, e := range evs {
		if e.Type == starflowtype.EventWakeReceived {
			wakes++
		}
	}
	if wakes != 1 {
		t.Fatalf("%d wake_received events, want 1", wakes)
	}
	rec.check(t)
}

func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
