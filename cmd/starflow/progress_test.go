package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// eventStore serves a run's events (and step rows) from memory and counts
// the reads: progress's cost, without a database's.
type eventStore struct {
	state.Adapter // nil: only the reads below are used
	events        []*starflowtype.Event
	steps         []*starflowtype.Step
	eventReads    atomic.Int64
	stepReads     atomic.Int64
}

// newEventStore holds a run of n steps in a for_each: a node_start and a
// node_complete each (every tenth tried twice, every hundredth failed).
func newEventStore(n int) *eventStore {
	s := &eventStore{}
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	add := func(typ starflowtype.EventType, scope string, i int, payload string, at time.Time) {
		s.events = append(s.events, &starflowtype.Event{ID: int64(len(s.events) + 1), RunID: "r", Attempt: 1, Type: typ,
			NodeID: "work", ScopePath: scope, Payload: json.RawMessage(payload), CreatedAt: at})
	}
	for i := range n {
		scope := fmt.Sprintf("loop.item_%d", i)
		start := t0.Add(time.Duration(i) * time.Millisecond)
		add(starflowtype.EventNodeStart, scope, i, `{"try":1}`, start)
		try := 1
		if i%10 == 0 {
			try = 2
			add(starflowtype.EventNodeStart, scope, i, `{"try":2}`, start.Add(time.Millisecond))
		}
		end := start.Add(5 * time.Millisecond)
		st := &starflowtype.Step{RunID: "r", Attempt: 1, ScopePath: scope, StepID: "work", Tries: try, DurationMS: 5}
		if i%100 == 0 {
			add(starflowtype.EventNodeError, scope, i, fmt.Sprintf(`{"try":%d,"error":"boom %d"}`, try, i), end)
			st.Status, st.Error = starflowtype.StepFailed, fmt.Sprintf("boom %d", i)
		} else {
			add(starflowtype.EventNodeComplete, scope, i, fmt.Sprintf(`{"try":%d}`, try), end)
			st.Status = starflowtype.StepSucceeded
		}
		s.steps = append(s.steps, st)
	}
	return s
}

func (s *eventStore) ListEvents(_ context.Context, p *state.ListEventsParams) ([]*starflowtype.Event, error) {
	s.eventReads.Add(1)
	var out []*starflowtype.Event
	for _, ev := range s.events[min(int(p.AfterID), len(s.events)):] {
		if p.Limit > 0 && len(out) == p.Limit {
			break
		}
		out = append(out, ev)
	}
	return out, nil
}

func (s *eventStore) ListSteps(context.Context, *state.ListStepsParams) ([]*starflowtype.Step, error) {
	s.stepReads.Add(1)
	return s.steps, nil
}

func newTestProgress(w *os.File, s state.Adapter) *progress {
	return newProgress(w, s, "r", 1)
}

// TestProgressLinear: showing N step events reads the store O(N/page)
// times and never reads the step rows per event (that made `starflow run`
// quadratic in the number of steps); each line still has its duration,
// tries and error.
func TestProgressLinear(t *testing.T) {
	t.Parallel()
	const n = 5000
	s := newEventStore(n)
	out, err := os.CreateTemp(t.TempDir(), "progress")
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	p := newTestProgress(out, s)
	p.poll(context.Background())
	if r := s.eventReads.Load(); r > int64(len(s.events)/eventPage+2) {
		t.Errorf("%d event reads for %d events", r, len(s.events))
	}
	if r := s.stepReads.Load(); r != 0 {
		t.Errorf("%d reads of the step rows for %d events", r, len(s.events))
	}
	if len(p.started) != 0 {
		t.Errorf("%d step instances left in flight", len(p.started))
	}
	if _, err := out.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines for %d steps", len(lines), n)
	}
	for _, want := range []string{
		"✗ loop.item_0/work failed 5ms (2 tries) boom 0",
		"✓ loop.item_1/work succeeded 5ms",
		"✓ loop.item_10/work succeeded 5ms (2 tries)",
	} {
		found := false
		for _, l := range lines {
			if strings.Join(strings.Fields(l), " ") == want {
				found = true
			}
		}
		if !found {
			t.Errorf("no line %q in:\n%s", want, strings.Join(lines[:12], "\n"))
		}
	}
}

// BenchmarkProgress: the time to show the events of a run of N steps, per
// event. Flat in N (it was linear in N per event, quadratic in all).
func BenchmarkProgress(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			s := newEventStore(n)
			devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer devnull.Close()
			b.ResetTimer()
			for range b.N {
				p := newTestProgress(devnull, s)
				p.poll(context.Background())
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(s.events)), "ns/event")
		})
	}
}
