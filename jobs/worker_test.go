package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/jobs"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
)

type upperIn struct {
	Text string `json:"text"`
}

type upperOut struct {
	Text string `json:"text"`
	Try  int    `json:"try"`
	Key  string `json:"key"`
}

func upper(_ context.Context, job *jobs.Job, in upperIn) (upperOut, error) {
	return upperOut{Text: strings.ToUpper(in.Text), Try: job.Tries, Key: job.IdempotencyKey}, nil
}

// TestWorkerServesJobs: a worker with a typed handler completes the job
// steps of many runs at once (Concurrency 3): each run gets its handler's
// output, decoded from its input; its progress reaches the live view.
func TestWorkerServesJobs(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.apply(steadyWorkflow)
		var running, most atomic.Int32
		progressed := make(chan string, 1)
		release := make(chan struct{})
		e.worker(jobs.Options{Concurrency: 3}, func(w *jobs.Worker) error {
			return jobs.Handle(w, "upper", func(ctx context.Context, job *jobs.Job, in upperIn) (upperOut, error) {
				n := running.Add(1)
				defer running.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if in.Text == "slow" {
					job.Progress(0.5, "half way")
					select {
					case progressed <- job.RunID:
					default: // a later try of it
					}
					select {
					case <-release:
					case <-ctx.Done():
						return upperOut{}, ctx.Err()
					}
				}
				time.Sleep(50 * time.Millisecond)
				return upper(ctx, job, in)
			})
		})
		slow := e.enqueue("upper", map[string]any{"text": "slow"})
		ids := map[string]string{}
		for i := range 8 {
			text := fmt.Sprintf("run %d", i)
			ids[e.enqueue("upper", map[string]any{"text": text})] = text
		}
		runID := <-progressed
		if runID != slow {
			t.Fatalf("progress of run %s, want %s", runID, slow)
		}
		waitFor(t, 10*time.Second, "the slow job's progress in the live view", func() bool {
			ps, err := e.eng.LiveProgress(context.Background(), slow)
			return err == nil && len(ps) == 1 && ps[0].StepID == "up" && ps[0].Fraction == 0.5 && ps[0].Message == "half way"
		})
		for id, text := range ids {
			run := e.wait(id)
			out := output(t, run)
			if run.Status != starflowtype.RunSucceeded || out["text"] != strings.ToUpper(text) || out["try"] != 1.0 || out["key"] == "" {
				t.Errorf("run %s: %s, output %s; want succeeded with %q at try 1", id, run.Status, run.Output, strings.ToUpper(text))
			}
		}
		close(release)
		if run := e.wait(slow); run.Status != starflowtype.RunSucceeded || output(t, run)["text"] != "SLOW" {
			t.Errorf("the slow run: %s, output %s", run.Status, run.Output)
		}
		if m := most.Load(); m > 3 || m < 2 {
			t.Errorf("at most %d handlers ran at once; want up to Concurrency 3 (and more than 1)", m)
		}
	})
}

// failWorkflow catches the job step's failure and outputs the error the
// step failed with, next to how many tries the job took.
const failWorkflow = `name: fail-%[1]s
steps:
  - id: guard
    try:
      steps:
        - id: work
          job: {type: %[1]s, input: %[2]s, heartbeat_timeout: 10s}
          retry_policy: {max_attempts: 2, initial_interval: 10ms, max_interval: 10ms}
      catch:
        - id: caught
          pass: "${{ error }}"
output: "${{ steps.guard.output }}"
`

// TestWorkerErrors: what a handler returns (or does) is the step's typed
// error, tried again or not as Handle documents; a panic fails its job and
// the worker serves the next one.
func TestWorkerErrors(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		type in struct {
			N int `json:"n"`
		}
		cases := []struct {
			typ, input string
			fn         func() (any, error)
			tries      int
			want       map[string]any // fields of the error
		}{
			{"typed", `{n: 1}`, func() (any, error) {
				return nil, &step.Error{Type: "quota_exceeded", Message: "no credits left", Details: map[string]any{"left": 0}}
			}, 1, map[string]any{"type": "quota_exceeded", "message": "no credits left", "details": map[string]any{"left": 0.0}}},
			{"typed-retryable", `{n: 1}`, func() (any, error) {
				return nil, fmt.Errorf("wrapped: %w", &step.Error{Type: "busy", Message: "try later", Retryable: true})
			}, 2, map[string]any{"type": "busy", "message": "try later"}},
			{"plain", `{n: 1}`, func() (any, error) { return nil, errors.New("flaky") }, 2,
				map[string]any{"type": "error", "message": "flaky"}},
			{"permanent", `{n: 1}`, func() (any, error) { return nil, step.Permanent(errors.New("hopeless")) }, 1,
				map[string]any{"type": "error", "message": "hopeless"}},
			{"panics", `{n: 1}`, func() (any, error) { panic("boom") }, 1,
				map[string]any{"type": "error", "message": "job handler panicked: boom"}},
			{"bad-output", `{n: 1}`, func() (any, error) { return func() {}, nil }, 1,
				map[string]any{"type": "error"}},
			{"bad-input", `{n: "seven"}`, func() (any, error) { t.Error("the handler ran on an input that does not decode"); return nil, nil }, 1,
				map[string]any{"type": "input_invalid"}},
		}
		calls := map[string]*atomic.Int32{}
		e.worker(jobs.Options{Concurrency: 4}, func(w *jobs.Worker) error {
			for _, c := range cases {
				calls[c.typ] = &atomic.Int32{}
				if err := jobs.Handle(w, c.typ, func(_ context.Context, _ *jobs.Job, _ in) (any, error) {
					calls[c.typ].Add(1)
					return c.fn()
				}); err != nil {
					return err
				}
			}
			return jobs.Handle(w, "upper", upper)
		})
		ids := map[string]string{}
		for _, c := range cases {
			e.apply(fmt.Sprintf(failWorkflow, c.typ, c.input))
			ids[c.typ] = e.enqueue("fail-"+c.typ, nil)
		}
		for _, c := range cases {
			run := e.wait(ids[c.typ])
			got := output(t, run)
			for k, v := range c.want {
				if fmt.Sprint(got[k]) != fmt.Sprint(v) {
					t.Errorf("%s: error %s = %v, want %v (the error: %s)", c.typ, k, got[k], v, run.Output)
				}
			}
			if got["step_id"] != "work" {
				t.Errorf("%s: error step_id %v, want work", c.typ, got["step_id"])
			}
			if n := e.count(`SELECT tries FROM worker_jobs WHERE run_id = $1`, ids[c.typ]); n != c.tries {
				t.Errorf("%s: %d tries, want %d", c.typ, n, c.tries)
			}
			if want := c.tries; c.typ == "bad-input" {
				want = 0
				if n := int(calls[c.typ].Load()); n != want {
					t.Errorf("%s: the handler ran %d times, want %d", c.typ, n, want)
				}
			} else if n := int(calls[c.typ].Load()); n != want {
				t.Errorf("%s: the handler ran %d times, want %d", c.typ, n, want)
			}
		}
		if !strings.Contains(fmt.Sprint(output(t, e.wait(ids["bad-output"]))["message"]), "does not encode as JSON") {
			t.Errorf("bad-output: %s", e.wait(ids["bad-output"]).Output)
		}
		if !strings.Contains(fmt.Sprint(output(t, e.wait(ids["bad-input"]))["message"]), "does not decode into") {
			t.Errorf("bad-input: %s", e.wait(ids["bad-input"]).Output)
		}
		// The worker survived the panic.
		e.apply(steadyWorkflow)
		if run := e.wait(e.enqueue("upper", map[string]any{"text": "still here"})); output(t, run)["text"] != "STILL HERE" {
			t.Errorf("after the panic: %s %s", run.Status, run.Output)
		}
	})
}

// TestWorkerLeaseLostOnCancel: a run cancelled while its job runs ends
// the job; the next heartbeat is refused (409) and the handler's context
// is cancelled with ErrLeaseLost as its cause.
func TestWorkerLeaseLostOnCancel(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.apply(steadyWorkflow)
		started := make(chan *jobs.Job, 1)
		cause := make(chan error, 1)
		e.worker(jobs.Options{}, func(w *jobs.Worker) error {
			return jobs.Handle(w, "upper", func(ctx context.Context, job *jobs.Job, in upperIn) (upperOut, error) {
				started <- job
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return upperOut{Text: "too late"}, nil
			})
		})
		runID := e.enqueue("upper", map[string]any{"text": "x"})
		job := <-started
		if _, err := e.eng.Cancel(context.Background(), runID); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-cause:
			if !errors.Is(err, jobs.ErrLeaseLost) || !errors.Is(err, starflowtype.ErrLeaseLost) {
				t.Fatalf("the handler's context ended with %v, want ErrLeaseLost", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the handler's context was not cancelled after its run was")
		}
		if run := e.wait(runID); run.Status != starflowtype.RunCancelled {
			t.Fatalf("run %s, want cancelled", run.Status)
		}
		waitFor(t, 10*time.Second, "the job to be cancelled", func() bool {
			return e.str(`SELECT status FROM worker_jobs WHERE id = $1`, job.ID) == "cancelled"
		})
		if out := e.str(`SELECT output_json FROM worker_jobs WHERE id = $1`, job.ID); out != "" {
			t.Errorf("the dropped result was stored: %s", out)
		}
	})
}

// TestWorkerLeaseExpiresWithoutHeartbeats: while no heartbeat gets
// through (the server answers 503), the worker cancels the handler 0.9 ×
// the heartbeat timeout after the last one that did (cause ErrLeaseLost)
// and drops its result; the server's sweep queues the job again and the
// next try completes it.
func TestWorkerLeaseExpiresWithoutHeartbeats(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.apply(upperWorkflow)
		cause := make(chan error, 1)
		var cutAt atomic.Int64
		e.worker(jobs.Options{}, func(w *jobs.Worker) error {
			return jobs.Handle(w, "upper", func(ctx context.Context, job *jobs.Job, in upperIn) (upperOut, error) {
				if job.Tries > 1 {
					return upper(ctx, job, in)
				}
				cutAt.Store(time.Now().UnixNano())
				e.refuse.Store(true)
				<-ctx.Done()
				cause <- context.Cause(ctx)
				e.refuse.Store(false)
				return upperOut{Text: "dropped"}, nil
			})
		})
		runID := e.enqueue("upper", map[string]any{"text": "second try"})
		select {
		case err := <-cause:
			if !errors.Is(err, jobs.ErrLeaseLost) || !strings.Contains(err.Error(), "no heartbeat got through") {
				t.Fatalf("cause %v, want ErrLeaseLost: no heartbeat got through", err)
			}
			if d := time.Since(time.Unix(0, cutAt.Load())); d > 8*time.Second {
				t.Errorf("the handler was cancelled %s after heartbeats stopped getting through; want within the 3 s timeout", d)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the handler was not cancelled while no heartbeat got through")
		}
		run := e.wait(runID)
		if out := output(t, run); run.Status != starflowtype.RunSucceeded || out["text"] != "SECOND TRY" || out["try"] != 2.0 {
			t.Fatalf("run %s, output %s; want succeeded by try 2", run.Status, run.Output)
		}
	})
}

// TestWorkerGracefulShutdown: when Run's context ends, a job in flight
// that finishes within the grace is completed and Run returns after it; a
// job that does not is cancelled (ErrShutdown) and not reported: it stays
// the server's until its lease expires and it is queued again.
func TestWorkerGracefulShutdown(t *testing.T) {
	eachStore(t, func(t *testing.T, e *env) {
		e.apply(upperWorkflow)
		started := make(chan string, 2)
		release := make(chan struct{})
		cause := make(chan error, 1)
		stop := e.worker(jobs.Options{ShutdownGrace: 500 * time.Millisecond, Concurrency: 2}, func(w *jobs.Worker) error {
			return jobs.Handle(w, "upper", func(ctx context.Context, job *jobs.Job, in upperIn) (upperOut, error) {
				started <- job.ID
				if in.Text == "stubborn" {
					<-ctx.Done()
					cause <- context.Cause(ctx)
					return upperOut{}, ctx.Err()
				}
				<-release
				return upper(ctx, job, in)
			})
		})
		quick := e.enqueue("upper", map[string]any{"text": "quick"})
		stubborn := e.enqueue("upper", map[string]any{"text": "stubborn"})
		<-started
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- stop() }()
		time.Sleep(100 * time.Millisecond)
		select {
		case err := <-stopped:
			t.Fatalf("Run returned (%v) while its jobs were still running within the grace", err)
		default:
		}
		close(release)
		if err := <-stopped; err != nil {
			t.Fatalf("Run: %v", err)
		}
		if err := <-cause; !errors.Is(err, jobs.ErrShutdown) {
			t.Fatalf("the stubborn job's context ended with %v, want ErrShutdown", err)
		}
		if run := e.wait(quick); run.Status != starflowtype.RunSucceeded || output(t, run)["text"] != "QUICK" {
			t.Fatalf("the job that finished within the grace: %s %s", run.Status, run.Output)
		}
		if st, errText := e.str(`SELECT status FROM worker_jobs WHERE run_id = $1`, stubborn),
			e.str(`SELECT error FROM worker_jobs WHERE run_id = $1`, stubborn); (st != "running" && st != "queued") || errText != "" {
			t.Fatalf("the job cancelled at shutdown is %s (error %q); want it running or queued again, not failed", st, errText)
		}
		// Another worker finishes it once its lease has expired.
		e.worker(jobs.Options{}, func(w *jobs.Worker) error { return jobs.Handle(w, "upper", upper) })
		if run := e.wait(stubborn); output(t, run)["text"] != "STUBBORN" || output(t, run)["try"] != 2.0 {
			t.Fatalf("the job cancelled at shutdown, after its lease: %s %s", run.Status, run.Output)
		}
	})
}

// TestWorkerRefusedPoll: a poll the server refuses for good (401: an
// unknown key) ends Run with that error instead of polling forever.
func TestWorkerRefusedPoll(t *testing.T) {
	e := newEnv(t, "sqlite")
	w, err := jobs.NewWorker(client.New(e.srv.URL, "sf_"+strings.Repeat("0", 43)), jobs.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := jobs.Handle(w, "upper", upper); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = w.Run(ctx)
	var p interface{ GetStatus() int }
	if err == nil || !errors.As(err, &p) || p.GetStatus() != 401 || ctx.Err() != nil {
		t.Fatalf("Run with an unknown key: %v; want the 401 at once", err)
	}
}

// TestWorkerRefusesBadSetup: every mistake in setting a worker up is an
// error naming it, never a panic.
func TestWorkerRefusesBadSetup(t *testing.T) {
	c := client.New("http://127.0.0.1:1", "")
	if _, err := jobs.NewWorker(nil, jobs.Options{}); err == nil {
		t.Error("NewWorker(nil): no error")
	}
	for _, o := range []jobs.Options{
		{Concurrency: -1}, {PollWait: 31 * time.Second}, {PollWait: -time.Second}, {WorkerID: strings.Repeat("w", 201)},
	} {
		if _, err := jobs.NewWorker(c, o); err == nil || !strings.Contains(err.Error(), "jobs: Options.") {
			t.Errorf("NewWorker(%+v): %v, want an error naming the option", o, err)
		}
	}
	w, err := jobs.NewWorker(c, jobs.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Errorf("Run without handlers: %v", err)
	}
	for _, typ := range []string{"", "has space", "starflow.reserved", strings.Repeat("t", 201)} {
		if err := jobs.Handle(w, typ, upper); err == nil {
			t.Errorf("Handle(%q): no error", typ)
		}
	}
	if err := jobs.Handle[upperIn, upperOut](w, "nil", nil); err == nil {
		t.Error("Handle with a nil func: no error")
	}
	if err := jobs.Handle[upperIn, upperOut](nil, "upper", upper); err == nil {
		t.Error("Handle on a nil worker: no error")
	}
	if err := jobs.Handle(w, "upper", upper); err != nil {
		t.Fatal(err)
	}
	if err := jobs.Handle(w, "upper", upper); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("a second handler of upper: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = w.Run(ctx) }() // polls an unreachable server, retrying
	late := 0
	waitFor(t, 10*time.Second, "Handle to be refused while Run runs", func() bool {
		late++
		err := jobs.Handle(w, fmt.Sprintf("late-%d", late), upper)
		return err != nil && strings.Contains(err.Error(), "while the worker runs")
	})
	if err := w.Run(ctx); err == nil || !strings.Contains(err.Error(), "running already") {
		t.Errorf("a second Run: %v", err)
	}
	cancel()
	wg.Wait()
}
