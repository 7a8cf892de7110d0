//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
)

// driver is the workload: producers enqueueing runs through the server's
// API (with an idempotency key, so an enqueue retried across a server
// kill starts one run), signalling the runs that wait for one, and a
// poller following the runs and the steps finished.
type driver struct {
	d      *deployment
	inputs int

	mu      sync.Mutex
	rng     *rand.Rand
	pending map[string]bool // enqueued, not yet seen terminal
	all     map[string]string
	samples []sample // steps finished over time
	seq     atomic.Int64

	enqueueRetries, signalRetries atomic.Int64
	signalsLost                   atomic.Int64 // signals not taken within signalPatience
}

// signalPatience bounds how long the driver keeps sending a run's signal,
// the end of the phase that enqueued it included.
const signalPatience = 3 * time.Minute

type sample struct {
	at    time.Time
	steps int64
}

func newDriver(d *deployment, seed uint64, inputs int) *driver {
	return &driver{d: d, inputs: inputs, rng: rand.New(rand.NewPCG(seed, 99)), pending: map[string]bool{}, all: map[string]string{}}
}

// start enqueues one run of workflow with input n, retrying until the
// server takes it, and signals it when it waits for one. Once the first
// request is sent the run may exist whatever became of the answer (the
// phase ending mid-request, a server killed after its commit), so the
// same idempotency key is sent until one answers, past the end of ctx
// (the phase) for at most signalPatience: a chaos-waits run enqueued
// and never signalled would wait for ever, and the checker would blame
// the engine (seen: a run whose enqueue committed as the calm phase
// ended, its answer cut off by the phase's context).
func (dr *driver) start(ctx context.Context, workflow string, n int) (string, error) {
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	key := fmt.Sprintf("chaos-%d-%d", dr.d.seed, dr.seq.Add(1))
	input, _ := json.Marshal(map[string]int{"n": n})
	ectx, stop := context.WithTimeout(context.WithoutCancel(ctx), signalPatience)
	defer stop()
	var id string
	for try := 0; ; try++ {
		if try > 0 {
			dr.enqueueRetries.Add(1)
			if !sleepCtx(ectx, 200*time.Millisecond) {
				return "", fmt.Errorf("enqueue %s with key %s: not answered in %s", workflow, key, signalPatience)
			}
		}
		cctx, cancel := context.WithTimeout(ectx, 5*time.Second)
		run, _, err := dr.d.client().Enqueue(cctx, workflow, client.EnqueueOptions{
			EnqueueRequest: api.EnqueueRequest{Input: input, MaxAttempts: 1000}, IdempotencyKey: key})
		cancel()
		if err == nil && run.ID != "" {
			id = run.ID
			break
		}
	}
	dr.mu.Lock()
	dr.pending[id] = true
	dr.all[id] = workflow
	dr.mu.Unlock()
	if workflow == "chaos-waits" {
		// Sent at once: a signal that arrives before its wait is held
		// in the wake inbox and consumed when the wait registers. It is
		// sent even after ctx (the phase) ends: a run whose signal the
		// harness gave up on would wait for it for ever, and the checker
		// would blame the engine (seen: a run enqueued 6 s before the end
		// of the chaos phase, while the server was down).
		sctx, stop := context.WithTimeout(context.WithoutCancel(ctx), signalPatience)
		defer stop()
		payload, _ := json.Marshal(map[string]int64{"go": value(int64(n))})
		for try := 0; ; try++ {
			if try > 0 {
				dr.signalRetries.Add(1)
				if !sleepCtx(sctx, 200*time.Millisecond) {
					dr.signalsLost.Add(1)
					return id, fmt.Errorf("signal go to run %s: not taken in %s", id, signalPatience)
				}
			}
			cctx, cancel := context.WithTimeout(sctx, 5*time.Second)
			_, err := dr.d.client().Signal(cctx, id, "go", payload)
			cancel()
			if err == nil {
				break
			}
		}
	}
	return id, nil
}

// produce keeps about inflight runs going until ctx ends.
func (dr *driver) produce(ctx context.Context, producers, inflight int) {
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				dr.mu.Lock()
				busy := len(dr.pending) >= inflight
				wf := enqueued[dr.rng.IntN(len(enqueued))]
				n := dr.rng.IntN(dr.inputs)
				dr.mu.Unlock()
				if busy {
					sleepCtx(ctx, 50*time.Millisecond)
					continue
				}
				_, _ = dr.start(ctx, wf, n)
			}
		}()
	}
	wg.Wait()
}

// poll follows the pending runs and the finished steps every 200 ms
// until ctx ends; while PostgreSQL is down it skips.
func (dr *driver) poll(ctx context.Context) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var steps int64
		err := dr.d.db.QueryRow(qctx, `SELECT count(*) FROM workflow_steps WHERE finished_at IS NOT NULL`).Scan(&steps)
		if err == nil {
			dr.mu.Lock()
			dr.samples = append(dr.samples, sample{at: time.Now(), steps: steps})
			dr.mu.Unlock()
		}
		dr.mu.Lock()
		ids := make([]string, 0, len(dr.pending))
		for id := range dr.pending {
			ids = append(ids, id)
		}
		dr.mu.Unlock()
		if len(ids) > 0 && err == nil {
			rows, err := dr.d.db.Query(qctx, `SELECT id::text FROM workflow_runs WHERE id = ANY($1::uuid[]) AND status IN ('succeeded', 'failed', 'cancelled')`, ids)
			if err == nil {
				var done []string
				for rows.Next() {
					var id string
					if rows.Scan(&id) == nil {
						done = append(done, id)
					}
				}
				rows.Close()
				dr.mu.Lock()
				for _, id := range done {
					delete(dr.pending, id)
				}
				dr.mu.Unlock()
			}
		}
		cancel()
	}
}

func (dr *driver) pendingCount() int {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	return len(dr.pending)
}

// stepsBetween is the number of steps finished from a to b and the time
// the samples span.
func (dr *driver) stepsBetween(a, b time.Time) (int64, time.Duration) {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	var first, last *sample
	for i := range dr.samples {
		s := &dr.samples[i]
		if s.at.Before(a) || s.at.After(b) {
			continue
		}
		if first == nil {
			first = s
		}
		last = s
	}
	if first == nil || last == first {
		return 0, 0
	}
	return last.steps - first.steps, last.at.Sub(first.at)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
		return false
	}
}
