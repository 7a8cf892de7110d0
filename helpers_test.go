package starflow_test

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// harness is an engine on a fresh SQLite file.
type harness struct {
	t     *testing.T
	store *sqlitestore.Store
	eng   *starflow.Engine
}

func newHarness(t *testing.T, cfg starflow.Config) *harness {
	t.Helper()
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(t.TempDir(), "starflow.db"), Synchronous: sqlitestore.SynchronousNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	if err := store.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg.Store = store
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	if cfg.RunRetryMin == 0 {
		cfg.RunRetryMin, cfg.RunRetryMax = 10*time.Millisecond, 50*time.Millisecond
	}
	eng, err := starflow.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, store: store, eng: eng}
}

func (h *harness) start() {
	h.t.Helper()
	if err := h.eng.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.eng.Stop(ctx)
	})
}

func (h *harness) apply(src string) *starflowtype.Definition {
	h.t.Helper()
	d, err := h.eng.Apply(context.Background(), "test.yaml", []byte(src))
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// runToEnd applies src, enqueues a run with input and waits until it
// settles.
func (h *harness) runToEnd(src string, input any) *starflowtype.Run {
	h.t.Helper()
	d := h.apply(src)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := h.eng.Enqueue(ctx, d.Name, input, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	run, err = h.eng.WaitRun(ctx, run.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return run
}

func (h *harness) steps(runID string) []*starflowtype.Step {
	h.t.Helper()
	s, err := h.store.ListSteps(context.Background(), &state.ListStepsParams{RunID: runID})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func (h *harness) events(runID string) []*starflowtype.Event {
	h.t.Helper()
	e, err := h.store.ListEvents(context.Background(), &state.ListEventsParams{RunID: runID})
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

func (h *harness) checkpoints(runID string) []*starflowtype.Checkpoint {
	h.t.Helper()
	c, err := h.store.ListCheckpoints(context.Background(), &state.ListCheckpointsParams{RunID: runID})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

func eventTypes(evs []*starflowtype.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = string(e.Type)
		if e.NodeID != "" {
			out[i] += ":" + e.NodeID
		}
	}
	return out
}
