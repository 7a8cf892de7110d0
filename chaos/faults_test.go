//go:build chaos

package chaos

import (
	"context"
	"math/rand/v2"
	"sort"
	"sync"
	"syscall"
	"time"
)

// The faults the harness injects from outside, one at a time, in rounds
// of every kind in a shuffled order. Storage faults come on top, from the
// fault layer inside each process (faultRules), and are counted from the
// processes' stderr.
const (
	faultWorkerKill   = "worker_kill"        // SIGKILL a worker, start it again 0.3–1.5 s later
	faultWorkerFreeze = "worker_freeze"      // SIGSTOP a worker for 1–7 s (its 4 s lease often expires), SIGCONT
	faultServerKill   = "server_kill"        // SIGKILL the server (API, wakes, maintenance candidate)
	faultServerFreeze = "server_freeze"      // SIGSTOP the server for 1–5 s
	faultRemoteKill   = "remote_worker_kill" // SIGKILL the remote job worker (its job lease expires)
	faultPGRestart    = "postgres_restart"   // immediate-mode stop (a crash: WAL replay at start), 0.3–1.5 s down
	faultNATSStop     = "nats_stop"          // SIGKILL nats-server, 1–3 s down (the outbox holds the warm writes)
	faultListenDrop   = "listen_drop"        // pg_terminate_backend of every LISTENing connection
	faultClockSkew    = "clock_skew"         // worker-3 killed and started with its clock 10–90 s ahead or behind
)

var externalFaults = []string{faultWorkerKill, faultWorkerFreeze, faultServerKill, faultServerFreeze, faultRemoteKill,
	faultPGRestart, faultNATSStop, faultListenDrop, faultClockSkew}

// event is one injected fault and how long the runs it hit took to move
// on.
type event struct {
	kind      string
	target    string
	at        time.Time
	affected  int           // runs in flight on the faulted component
	recovered time.Duration // from the fault until each affected run finished a step or ended; -1: not within the bound
}

type injector struct {
	d   *deployment
	rng *rand.Rand

	mu     sync.Mutex
	events []*event
	wg     sync.WaitGroup
}

func newInjector(d *deployment, seed uint64) *injector {
	return &injector{d: d, rng: rand.New(rand.NewPCG(seed, 4242))}
}

func (in *injector) between(lo, hi time.Duration) time.Duration {
	in.mu.Lock()
	defer in.mu.Unlock()
	return lo + time.Duration(in.rng.Int64N(int64(hi-lo)+1))
}

// run injects faults until ctx ends, then waits for the recovery
// measurements of the last ones.
func (in *injector) run(ctx context.Context) {
	for ctx.Err() == nil {
		in.mu.Lock()
		round := append([]string(nil), externalFaults...)
		in.rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		in.mu.Unlock()
		for _, kind := range round {
			if ctx.Err() != nil {
				break
			}
			in.inject(ctx, kind)
			sleepCtx(ctx, in.between(200*time.Millisecond, time.Second))
		}
	}
	in.wg.Wait()
}

// inject performs one fault of kind and heals it.
func (in *injector) inject(ctx context.Context, kind string) {
	d := in.d
	e := &event{kind: kind}
	switch kind {
	case faultWorkerKill, faultWorkerFreeze:
		in.mu.Lock()
		w := d.workers[in.rng.IntN(len(d.workers))]
		in.mu.Unlock()
		e.target = w.name
		ids := in.affected(ctx, d.runnerIDsOf(w.name))
		e.at = time.Now()
		if kind == faultWorkerKill {
			w.kill()
			sleepCtx(ctx, in.between(300*time.Millisecond, 1500*time.Millisecond))
			_ = w.start()
		} else {
			w.signal(syscall.SIGSTOP)
			sleepCtx(ctx, in.between(time.Second, 7*time.Second))
			w.signal(syscall.SIGCONT)
		}
		in.measure(e, ids)
	case faultClockSkew:
		w := d.workers[2]
		e.target = w.name
		skew := in.between(10*time.Second, 90*time.Second)
		in.mu.Lock()
		if in.rng.IntN(2) == 0 {
			skew = -skew
		}
		in.mu.Unlock()
		d.skew.Store(int64(skew.Round(time.Second)))
		ids := in.affected(ctx, d.runnerIDsOf(w.name))
		e.at = time.Now()
		w.kill()
		_ = w.start()
		in.measure(e, ids)
	case faultServerKill, faultServerFreeze, faultRemoteKill:
		p := d.server
		if kind == faultRemoteKill {
			p = d.remote
		}
		e.target = p.name
		ids := in.affected(ctx, nil)
		e.at = time.Now()
		switch kind {
		case faultServerFreeze:
			p.signal(syscall.SIGSTOP)
			sleepCtx(ctx, in.between(time.Second, 5*time.Second))
			p.signal(syscall.SIGCONT)
		default:
			p.kill()
			sleepCtx(ctx, in.between(500*time.Millisecond, 1500*time.Millisecond))
			_ = p.start()
		}
		in.measure(e, ids)
	case faultPGRestart:
		e.target = "postgres"
		ids := in.affected(ctx, nil)
		e.at = time.Now()
		if err := d.pg.restart(in.between(300*time.Millisecond, 1500*time.Millisecond)); err != nil {
			d.t.Errorf("PostgreSQL restart: %v", err)
		}
		in.measure(e, ids)
	case faultNATSStop:
		e.target = "nats"
		ids := in.affected(ctx, nil)
		e.at = time.Now()
		d.nats.kill()
		sleepCtx(ctx, in.between(time.Second, 3*time.Second))
		_ = d.nats.start()
		in.measure(e, ids)
	case faultListenDrop:
		e.target = "postgres"
		ids := in.affected(ctx, nil)
		e.at = time.Now()
		// Tried a few times: the harness's own pooled connections may
		// be the ones a PostgreSQL restart broke.
		// A listener that is reconnecting (after a restart, or the
		// previous drop: it backs off up to 5 s) is waited for, a while.
		dropped, err := 0, error(nil)
		for try := 0; try < 20 && dropped == 0 && ctx.Err() == nil; try++ {
			if try > 0 {
				sleepCtx(ctx, 300*time.Millisecond)
			}
			qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			err = d.db.QueryRow(qctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE pid <> pg_backend_pid() AND query ILIKE 'listen %') t`).Scan(&dropped)
			cancel()
		}
		e.at = time.Now()
		if err != nil || dropped == 0 {
			d.t.Logf("listen_drop: no LISTENing connection terminated (err %v): not counted", err)
			return
		}
		in.measure(e, ids)
	}
}

// affected is the runs running at this instant: on one of runners, or
// anywhere when runners is nil.
func (in *injector) affected(ctx context.Context, runners []string) []string {
	qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	q := `SELECT id::text FROM workflow_runs WHERE status = 'running' AND leased_by IS NOT NULL`
	args := []any{}
	if runners != nil {
		q += ` AND leased_by = ANY($1)`
		args = append(args, runners)
	}
	rows, err := in.d.db.Query(qctx, q, args...)
	for try := 1; err != nil && try < 3; try++ {
		rows, err = in.d.db.Query(qctx, q, args...)
	}
	if err != nil {
		return nil
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if rows.Scan(&id) == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// recoveryBound is how long a hit run may take to move on before the
// measurement gives up (the checker still judges the run at the end).
const recoveryBound = 90 * time.Second

// measure records e and, in the background, the time until every run of
// ids finished a step after the fault or ended.
func (in *injector) measure(e *event, ids []string) {
	e.affected = len(ids)
	in.mu.Lock()
	in.events = append(in.events, e)
	in.mu.Unlock()
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		left := append([]string(nil), ids...)
		for len(left) > 0 {
			if time.Since(e.at) > recoveryBound {
				in.mu.Lock()
				e.recovered = -1
				in.mu.Unlock()
				return
			}
			time.Sleep(100 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			rows, err := in.d.db.Query(ctx, `SELECT r.id::text FROM workflow_runs r WHERE r.id = ANY($1::uuid[])
				AND (r.status IN ('succeeded', 'failed', 'cancelled')
				     OR EXISTS (SELECT 1 FROM workflow_steps s WHERE s.run_id = r.id AND s.finished_at > $2))`, left, e.at)
			if err != nil {
				cancel()
				continue
			}
			moved := map[string]bool{}
			for rows.Next() {
				var id string
				if rows.Scan(&id) == nil {
					moved[id] = true
				}
			}
			rows.Close()
			cancel()
			var still []string
			for _, id := range left {
				if !moved[id] {
					still = append(still, id)
				}
			}
			left = still
		}
		in.mu.Lock()
		e.recovered = time.Since(e.at)
		in.mu.Unlock()
	}()
}

// summary is, per kind, the count of faults and the p50 and p99 of the
// recovery times of those that hit runs in flight.
type faultSummary struct {
	count, hit, unrecovered int
	p50, p99                time.Duration
}

func (in *injector) summary() map[string]*faultSummary {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]*faultSummary{}
	times := map[string][]time.Duration{}
	for _, e := range in.events {
		s := out[e.kind]
		if s == nil {
			s = &faultSummary{}
			out[e.kind] = s
		}
		s.count++
		if e.affected == 0 {
			continue
		}
		s.hit++
		if e.recovered < 0 {
			s.unrecovered++
			continue
		}
		times[e.kind] = append(times[e.kind], e.recovered)
	}
	for kind, ts := range times {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		out[kind].p50 = quantile(ts, 0.50)
		out[kind].p99 = quantile(ts, 0.99)
	}
	return out
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted)-1) + 0.5)
	return sorted[i]
}
