package starflow_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// TestWaitsOnPostgres runs a signal wait, an early signal (inbox), a
// child run and session variables through the engine on PostgreSQL.
func TestWaitsOnPostgres(t *testing.T) {
	t.Parallel()
	store := openPG(t)
	ctx := context.Background()
	eng, err := starflow.New(starflow.Config{Store: store, Logger: quietLogger(), PollInterval: 20 * time.Millisecond, WakeKeys: pgWakeKeys})
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		eng.Stop(sctx)
	})
	for _, src := range []string{childDefs, `name: pgwait
steps:
  - id: keep
    session_write: {session: "${{ input.s }}", key: k, value: "${{ input.s }}", keep_until: 1h}
  - id: go
    wait: {signal: go, timeout: 1h}
  - id: call
    workflow_call: {workflow: child, input: {n: "${{ steps.go.output.n }}"}}
  - id: read
    session_read: {session: "${{ input.s }}", key: k}
output: "${{ [steps.call.output.doubled, steps.read.output] }}"
`} {
		if _, err := eng.Apply(ctx, "t.yaml", []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	parkedRun := func(id string) *starflowtype.Run {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r, err := store.GetRun(ctx, &state.GetRunParams{ID: id})
			if err != nil {
				t.Fatal(err)
			}
			if r.Status == starflowtype.RunPaused && r.ClaimState == starflowtype.ClaimParked {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %s never parked: %s %s %q", id, r.Status, r.ClaimState, r.Error)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	end := func(id string) *starflowtype.Run {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := eng.WaitRun(wctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	late, err := eng.Enqueue(ctx, "pgwait", map[string]any{"s": "a"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r := parkedRun(late.ID); r.LeasedBy != "" || len(r.Checkpoint) == 0 {
		t.Fatalf("parked run: leased_by %q, checkpoint %s", r.LeasedBy, r.Checkpoint)
	}
	if res, err := eng.Signal(ctx, late.ID, "go", json.RawMessage(`{"n": 5}`)); err != nil || res.Wait == nil {
		t.Fatalf("signal: %+v %v", res, err)
	}
	if r := end(late.ID); r.Status != starflowtype.RunSucceeded || string(r.Output) != `[10,"a"]` {
		t.Fatalf("run %s %s: %s", r.Status, r.Error, r.Output)
	}

	eng2, err := starflow.New(starflow.Config{Store: store, Logger: quietLogger(), NoRunner: true, WakeKeys: pgWakeKeys})
	if err != nil {
		t.Fatal(err)
	}
	early, err := eng2.Enqueue(ctx, "pgwait", map[string]any{"s": "b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := eng2.Signal(ctx, early.ID, "go", json.RawMessage(`{"n": 7}`)); err != nil || res.Inbox == nil {
		t.Fatalf("early signal: %+v %v", res, err)
	}
	if r := end(early.ID); r.Status != starflowtype.RunSucceeded || string(r.Output) != `[14,"b"]` {
		t.Fatalf("run %s %s: %s", r.Status, r.Error, r.Output)
	}
}

// TestPostgresWakeKeysAtStart: a PostgreSQL store keeps no signing secret
// (issue 10 item 1), so a runner started without a key ring fails at once
// with ErrNoWakeKeys, naming STARFLOW_WAKE_KEYS; a process whose ring
// holds another secret under a key id another process registered fails
// with ErrWakeKeyMismatch; the store holds only the key's id and
// fingerprint.
func TestPostgresWakeKeysAtStart(t *testing.T) {
	t.Parallel()
	store := openPG(t)
	ctx := context.Background()
	none, err := starflow.New(starflow.Config{Store: store, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := none.Start(ctx); !errors.Is(err, starflowtype.ErrNoWakeKeys) || !strings.Contains(err.Error(), "STARFLOW_WAKE_KEYS") {
		t.Fatalf("Start without keys on PostgreSQL: %v, want ErrNoWakeKeys naming STARFLOW_WAKE_KEYS", err)
	}
	none.Stop(ctx)

	good, err := starflow.New(starflow.Config{Store: store, Logger: quietLogger(), NoRunner: true, Maintenance: true, WakeKeys: pgWakeKeys})
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { good.Stop(context.Background()) })
	keys, err := store.WakeKeys(ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != "pgtest" || len(keys[0].Fingerprint) != 64 {
		t.Fatalf("registered keys %+v, %v; want pgtest with a fingerprint", keys, err)
	}
	other, err := starflow.New(starflow.Config{Store: store, Logger: quietLogger(), NoRunner: true, Maintenance: true,
		WakeKeys: "pgtest:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{9}, 32))})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(ctx); !errors.Is(err, starflowtype.ErrWakeKeyMismatch) {
		t.Fatalf("Start with another secret under pgtest: %v, want ErrWakeKeyMismatch", err)
	}
	other.Stop(ctx)
}
