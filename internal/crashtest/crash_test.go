package crashtest

import (
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The crash tests' load and tunables (issue 3, Acceptance).
const (
	crashRuns  = 200
	crashSteps = 10
	// crashStarted is how many runs must have succeeded before a worker
	// is killed or frozen, so that it dies mid-run rather than at start.
	crashStarted = 20
)

// crashConcurrency is each worker's --concurrency.
const crashConcurrency = 8

// crashWorkerFlags are the short tunables of the crash tests' workers.
var crashWorkerFlags = []string{"--lease-ttl", "3s", "--heartbeat", "1s", "--poll-interval", "100ms",
	"--concurrency", strconv.Itoa(crashConcurrency), "--grace", "2s"}

// crashSetup applies the 10-step side-effects workflow, enqueues 200 runs,
// and starts a server (the lease sweep, every second) and three workers
// named w1, w2, w3. It returns once w1 holds leases and some runs have
// succeeded.
func crashSetup(t *testing.T) (*cluster, *sideEffects, []*process) {
	t.Helper()
	c := newCluster(t, 16)
	svc := newSideEffects(t, c)
	c.apply("sidefx", sideEffectWorkflow("sidefx", svc.URL(), crashSteps, nil))
	c.enqueue("sidefx", crashRuns)
	c.startServer()
	workers := []*process{
		c.startWorker("w1", crashWorkerFlags...),
		c.startWorker("w2", crashWorkerFlags...),
		c.startWorker("w3", crashWorkerFlags...),
	}
	victim := workers[0]
	waitFor(t, 120*time.Second, "runs to succeed while w1 holds leases", func() bool {
		return c.count(`SELECT count(*) FROM workflow_runs WHERE status = 'succeeded'`) >= crashStarted &&
			c.leasedBy(victim.runnerID) > 0
	})
	return c, svc, workers
}

// leasedBy counts the runs runner holds a lease on.
func (c *cluster) leasedBy(runner string) int {
	return c.count(`SELECT count(*) FROM workflow_runs WHERE leased_by = $1 AND claim_state IN ('claimed', 'running')`, runner)
}

// TestSIGKILLWorker: three workers execute 200 runs of a 10-step
// side-effects workflow; the first is killed with SIGKILL while it holds
// leases. Every run ends succeeded; the dead worker's runs were re-claimed
// after the TTL and a sweep (a runner_lost event naming it, then a claim
// by another worker, lease_epoch ≥ 2); no write of any run was made
// without its lease (event order); the service never accepted an epoch
// below one it had accepted for the same idempotency key; and for every
// run the final attempt's checkpoints, succeeded steps and step rows are
// the workflow's 10 steps.
func TestSIGKILLWorker(t *testing.T) {
	start := time.Now()
	c, svc, workers := crashSetup(t)
	victim := workers[0]

	killed := c.dbNow()
	victim.kill(t)
	held := c.runIDs(`SELECT id::text FROM workflow_runs WHERE leased_by = $1 AND claim_state IN ('claimed', 'running')`, victim.runnerID)
	t.Logf("killed %s (%s) holding %d runs", victim.name, victim.runnerID, len(held))

	c.waitAllSucceeded(crashRuns, 150*time.Second)

	runs := c.runs()
	c.checkLedger(runs, crashRuns, crashSteps)
	c.checkCheckpointsMatchCompletions()
	hist := c.checkLeaseOrder(runs, c.events())
	lost := checkTakenOver(t, hist, victim.runnerID, killed, c.dbNow())
	for _, id := range held {
		if !slices.Contains(lost, id) {
			t.Errorf("run %s, leased by the killed worker, was not declared lost and taken over", id)
		}
	}
	effects := svc.checkFencing()
	checkFinalEffects(t, runs, effects, crashSteps)
	c.stopGracefully()
	t.Logf("%d runs of the killed worker re-claimed; %d side effects recorded (%d refused) for %d runs × %d steps; %s",
		len(lost), len(effects), refused(effects), crashRuns, crashSteps, time.Since(start).Round(time.Millisecond))
}

// TestSIGSTOPWorker: as TestSIGKILLWorker, but the first worker is frozen
// with SIGSTOP while every run it executes has a request in flight at the
// side-effects service, kept frozen until the sweep has re-queued its runs
// and other workers have written those side effects again under a newer
// epoch (past its TTL), then continued with SIGCONT. The service holds the
// frozen worker's in-flight requests and decides them only after the
// takeover, as a slow network would deliver them. Every run ends
// succeeded; those late requests are all refused with 409 (fencing reaches
// side effects); the continued worker writes nothing more for the runs it
// lost (no write without the lease in any run's events, the next claim
// another worker's, every checkpoint matched by a completion made under
// the lease) and logs their lease loss itself; it keeps running and stops
// cleanly on SIGTERM.
func TestSIGSTOPWorker(t *testing.T) {
	start := time.Now()
	c, svc, workers := crashSetup(t)
	victim := workers[0]

	// Every slot of w1 ends up waiting on a request held by the service,
	// so that the freeze catches no run between two writes.
	svc.hold(victim.name, "")
	waitFor(t, 60*time.Second, "a request of every run of w1 in flight at the service", func() bool {
		return len(heldRuns(svc.heldRequests())) >= crashConcurrency
	})
	stopped := c.dbNow()
	victim.signal(t, syscall.SIGSTOP)
	t.Cleanup(func() { _ = victim.cmd.Process.Signal(syscall.SIGCONT) })
	frozenAt := time.Now()

	// Stay frozen until other workers have written, under a newer epoch,
	// every side effect the frozen worker has in flight. A run whose row
	// the worker froze while locking (inside a heartbeat) cannot be swept
	// before it continues: it is left alone once its lease has been
	// expired for long enough that the 1 s sweep would have taken it.
	var late, stuck []request
	waitFor(t, 120*time.Second, "other workers to take over the frozen worker's runs", func() bool {
		late, stuck = late[:0], stuck[:0]
		for _, r := range svc.heldRequests() {
			if svc.superseded(r.key, r.epoch) {
				late = append(late, r)
			} else {
				stuck = append(stuck, r)
			}
		}
		if len(stuck) == 0 {
			return true
		}
		return len(late) > 0 && c.count(`SELECT count(*) FROM workflow_runs WHERE id = ANY ($1) AND leased_by = $2
		           AND lease_until < now() - interval '5 seconds'`, heldRuns(stuck), victim.runnerID) == len(heldRuns(stuck))
	})
	if len(stuck) > 0 {
		t.Logf("%d runs not swept: the worker froze holding their row lock", len(heldRuns(stuck)))
	}
	svc.release()
	waitFor(t, 30*time.Second, "the held requests to be decided", func() bool {
		for _, r := range svc.heldRequests() {
			if !r.decided {
				return false
			}
		}
		return true
	})
	continued := c.dbNow()
	victim.signal(t, syscall.SIGCONT)
	frozen := time.Since(frozenAt)
	decided := map[string]request{}
	for _, r := range svc.heldRequests() {
		decided[r.key+"@"+strconv.FormatInt(r.epoch, 10)] = r
	}
	for _, r := range late {
		if d := decided[r.key+"@"+strconv.FormatInt(r.epoch, 10)]; d.accepted {
			t.Errorf("late request %s with epoch %d of the frozen worker was accepted", r.key, r.epoch)
		}
	}

	c.waitAllSucceeded(crashRuns, 150*time.Second)

	runs := c.runs()
	c.checkLedger(runs, crashRuns, crashSteps)
	c.checkCheckpointsMatchCompletions()
	hist := c.checkLeaseOrder(runs, c.events())
	lost := checkTakenOver(t, hist, victim.runnerID, stopped, continued)
	for _, id := range heldRuns(late) {
		if !slices.Contains(lost, id) {
			t.Errorf("run %s had a request of the frozen worker superseded but was not declared lost and taken over", id)
		}
	}
	// The continued worker finds out by itself, from a refused heartbeat
	// or write, that it lost those runs.
	waitFor(t, 60*time.Second, "the continued worker to log the loss of each lease", func() bool {
		log := victim.log.String()
		for _, id := range lost {
			if !loggedLeaseLoss(log, id) {
				return false
			}
		}
		return true
	})
	if !victim.running() {
		t.Fatalf("the continued worker exited")
	}

	effects := svc.checkFencing()
	checkFinalEffects(t, runs, effects, crashSteps)
	refusedLate := 0
	for _, e := range effects {
		if e.worker != victim.name || e.accepted {
			continue
		}
		refusedLate++
		h := hist[e.runID].holders()
		if e.epoch < 1 || int(e.epoch) > len(h) || h[e.epoch-1] != victim.runnerID || e.epoch >= runs[e.runID].epoch {
			t.Errorf("refused side effect %d (%s, epoch %d) is not a superseded epoch of the frozen worker (claims %v)", e.seq, e.key, e.epoch, h)
		}
	}
	if refusedLate == 0 {
		t.Errorf("the side-effects service refused no request of the frozen worker")
	}
	c.stopGracefully()
	t.Logf("%d runs of the frozen worker taken over while it was stopped for %s; %d of its late requests refused with 409; %d side effects recorded; %s",
		len(lost), frozen.Round(time.Millisecond), refusedLate, len(effects), time.Since(start).Round(time.Millisecond))
}

// heldRuns lists the distinct runs of requests.
func heldRuns(reqs []request) []string {
	var ids []string
	for _, r := range reqs {
		if !slices.Contains(ids, r.runID) {
			ids = append(ids, r.runID)
		}
	}
	return ids
}

// loggedLeaseLoss reports whether a worker's log (slog text or JSON
// lines) has a line about losing the lease of run id.
func loggedLeaseLoss(log, id string) bool {
	for _, line := range strings.Split(log, "\n") {
		if (strings.Contains(line, "run_id="+id) || strings.Contains(line, `"run_id":"`+id+`"`)) && strings.Contains(line, "lease lost") {
			return true
		}
	}
	return false
}

func refused(effects []effect) int {
	n := 0
	for _, e := range effects {
		if !e.accepted {
			n++
		}
	}
	return n
}
