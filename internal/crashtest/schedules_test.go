package crashtest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// The schedules acceptance (issue 15): real `starflow server` processes on
// one PostgreSQL.

const everySecond = `name: %s
schedules:
  - {cron: "@every 1s", overlap: allow, catchup: %s}
steps:
  - id: a
    pass: "${{ input }}"
`

// slowSkip starts a run every second that takes about three seconds (a
// durable timer): overlap skip gives a tick no run while one is going.
const slowSkip = `name: slow
schedules:
  - {cron: "@every 1s", overlap: skip}
steps:
  - id: nap
    wait: {timer: 3s}
`

// tickRun is one run a schedule started.
type tickRun struct {
	id                       string
	tick, created, completed time.Time
	// queued and ended are the ids of its run_queued and run_succeeded
	// events (ended 0 while it has not ended): event ids are taken in
	// the order the writes happen.
	queued, ended int64
}

// scheduled lists the runs of workflow by tick, checking each is a
// schedule's (trigger_type schedule, its key naming its tick) and that no
// tick has two.
func (c *cluster) scheduled(workflow string) []tickRun {
	c.t.Helper()
	rows, err := c.pool().Query(context.Background(), `
		SELECT r.id::text, r.trigger_type, r.idempotency_key, r.created_at, coalesce(r.completed_at, now() + interval '1 day'),
		       (SELECT min(e.id) FROM workflow_run_events e WHERE e.run_id = r.id AND e.event_type = 'run_queued'),
		       coalesce((SELECT max(e.id) FROM workflow_run_events e WHERE e.run_id = r.id AND e.event_type = 'run_succeeded'), 0)
		  FROM workflow_runs r WHERE r.workflow_name = $1 ORDER BY r.idempotency_key`, workflow)
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	var out []tickRun
	for rows.Next() {
		var r tickRun
		var trigger, key string
		if err := rows.Scan(&r.id, &trigger, &key, &r.created, &r.completed, &r.queued, &r.ended); err != nil {
			c.t.Fatal(err)
		}
		prefix := "schedule/" + workflow + "/0/"
		if trigger != "schedule" || !strings.HasPrefix(key, prefix) {
			c.t.Fatalf("run %s of %s: trigger %s, key %q", r.id, workflow, trigger, key)
		}
		if r.tick, err = time.Parse(time.RFC3339, strings.TrimPrefix(key, prefix)); err != nil {
			c.t.Fatalf("run %s: key %q: %v", r.id, key, err)
		}
		if len(out) > 0 && out[len(out)-1].tick.Equal(r.tick) {
			c.t.Fatalf("tick %s of %s has two runs", r.tick, workflow)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		c.t.Fatal(err)
	}
	return out
}

// gaps lists, for each hole in the runs' ticks, how many ticks of one
// second it skipped.
func gaps(runs []tickRun) []int {
	var out []int
	for i := 1; i < len(runs); i++ {
		if d := int(runs[i].tick.Sub(runs[i-1].tick) / time.Second); d != 1 {
			out = append(out, d-1)
		}
	}
	return out
}

func leader(procs ...*process) *process {
	for _, p := range procs {
		if strings.Contains(p.log.String(), "is the maintenance leader") && !strings.Contains(p.log.String(), "is no longer the maintenance leader") {
			return p
		}
	}
	return nil
}

// TestSchedulesTwoServers: two `starflow server` processes on one
// PostgreSQL with a schedule of every second for 20 s start one run per
// tick, none twice, with no hole — also across the SIGKILL of the
// maintenance leader halfway (the other takes over) — and overlap skip
// starts no run while the previous one (three seconds long) has not ended.
func TestSchedulesTwoServers(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 4)
	c.apply("every", fmt.Sprintf(everySecond, "every", "last"))
	c.apply("slow", slowSkip)
	serve := func(name string) *process {
		p := c.start(name, nil, "server", "--store", c.storeURL, "--addr", "127.0.0.1:0", "--leader-ttl", "1s")
		p.waitStarted(t, "server")
		return p
	}
	s1, s2 := serve("server-1"), serve("server-2")
	c.startWorker("worker", "--poll-interval", "100ms")
	start := c.dbNow()
	waitFor(t, 10*time.Second, "a leader", func() bool { return leader(s1, s2) != nil })
	time.Sleep(10 * time.Second)
	lead := leader(s1, s2)
	lead.kill(t)
	killed := c.dbNow()
	time.Sleep(10 * time.Second)
	end := c.dbNow()

	runs := c.scheduled("every")
	var during []tickRun
	for _, r := range runs {
		if r.tick.After(start) && !r.tick.After(end.Add(-time.Second)) {
			during = append(during, r)
		}
	}
	want := int(end.Add(-time.Second).Truncate(time.Second).Sub(start.Truncate(time.Second)) / time.Second)
	if len(during) < want-1 {
		t.Errorf("%d runs for the %d ticks of 20 s", len(during), want)
	}
	for _, g := range gaps(runs) {
		if g > 1 {
			t.Errorf("a hole of %d ticks in %v", g, ticksOf(runs))
		}
	}
	late := 0
	for _, r := range runs {
		if d := r.created.Sub(r.tick); d > 2500*time.Millisecond || d < 0 {
			late++
			t.Logf("tick %s: run created %v after it", r.tick.Format(time.TimeOnly), d)
		}
	}
	if late > 1 {
		t.Errorf("%d ticks fired late", late)
	}
	t.Logf("%d runs of every second over %v; leader %s killed at %s; holes %v",
		len(runs), end.Sub(start).Round(time.Millisecond), lead.name, killed.Format(time.TimeOnly), gaps(runs))

	slow := c.scheduled("slow")
	if len(slow) < 3 || len(slow) > 8 {
		t.Errorf("overlap skip: %d runs of a 3 s run every second over 20 s", len(slow))
	}
	for i := 1; i < len(slow); i++ {
		if prev := slow[i-1]; prev.ended == 0 || slow[i].queued < prev.ended {
			t.Errorf("overlap skip: run %s (tick %s) started while %s (ended %s) ran", slow[i].id,
				slow[i].tick.Format(time.TimeOnly), slow[i-1].id, slow[i-1].completed.Format(time.TimeOnly))
		}
	}
	var lastTick time.Time
	if err := c.pool().QueryRow(context.Background(), `SELECT last_tick_at FROM workflow_schedules WHERE workflow_name = 'slow'`).Scan(&lastTick); err != nil {
		t.Fatal(err)
	}
	if lastTick.Before(end.Add(-3 * time.Second)) {
		t.Errorf("overlap skip: the schedule's last tick %s lags (now %s)", lastTick, end)
	}
}

func ticksOf(runs []tickRun) []string {
	var out []string
	for _, r := range runs {
		out = append(out, r.tick.Format(time.TimeOnly))
	}
	return out
}

// TestSchedulesCatchupAfterDowntime: every process is down across five
// ticks of three schedules of every second; when a server starts again,
// catchup all starts a run for each missed tick, last one for the newest,
// none none, and every schedule goes on with the next tick.
func TestSchedulesCatchupAfterDowntime(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 4)
	for _, mode := range []string{"all", "last", "none"} {
		c.apply("catchup-"+mode, fmt.Sprintf(everySecond, "catchup-"+mode, mode))
	}
	s := c.startServer()
	waitFor(t, 15*time.Second, "two ticks fired", func() bool {
		return c.count(`SELECT count(*) FROM workflow_runs WHERE workflow_name = 'catchup-none'`) >= 2
	})
	s.kill(t)
	down := c.dbNow()
	time.Sleep(5500 * time.Millisecond)
	up := c.dbNow()
	c.startServer()
	waitFor(t, 15*time.Second, "two ticks after the restart", func() bool {
		return c.count(`SELECT count(*) FROM workflow_runs WHERE workflow_name = 'catchup-none' AND created_at > $1`, up) >= 2
	})

	all, last, none := c.scheduled("catchup-all"), c.scheduled("catchup-last"), c.scheduled("catchup-none")
	if g := gaps(all); len(g) != 0 {
		t.Fatalf("catchup all: holes %v in %v", g, ticksOf(all))
	}
	// The ticks all fired and none did not, after none's first run (the
	// first pass of the first server also found missed ticks: those
	// since the definitions were applied): the missed ones.
	var missed []time.Time
	for _, r := range all {
		if !r.tick.After(none[0].tick) {
			continue
		}
		if !slices.ContainsFunc(none, func(n tickRun) bool { return n.tick.Equal(r.tick) }) {
			missed = append(missed, r.tick)
		}
	}
	downTicks := int(up.Truncate(time.Second).Sub(down.Truncate(time.Second)) / time.Second)
	if len(missed) < downTicks || len(missed) < 5 {
		t.Fatalf("catchup none skipped %d ticks (%v); %d fell due while every process was down", len(missed), missed, downTicks)
	}
	if g := gaps(none); len(g) != 1 || g[0] != len(missed) {
		t.Errorf("catchup none: holes %v, want one of %d", g, len(missed))
	}
	for _, m := range missed[:len(missed)-1] {
		if slices.ContainsFunc(last, func(r tickRun) bool { return r.tick.Equal(m) }) {
			t.Errorf("catchup last fired the older missed tick %s", m.Format(time.TimeOnly))
		}
	}
	newest := missed[len(missed)-1]
	if !slices.ContainsFunc(last, func(r tickRun) bool { return r.tick.Equal(newest) }) {
		t.Errorf("catchup last did not fire the newest missed tick %s: %v", newest.Format(time.TimeOnly), ticksOf(last))
	}
	if g := gaps(last); len(g) != 1 || g[0] != len(missed)-1 {
		t.Errorf("catchup last: holes %v, want one of %d", g, len(missed)-1)
	}
	for _, r := range all {
		if r.tick.After(down) && r.tick.Before(up) && r.created.Before(up) {
			t.Errorf("tick %s fired while every process was down", r.tick.Format(time.TimeOnly))
		}
	}
	t.Logf("down %s–%s: %d ticks missed (%s … %s); all %d runs, last %d, none %d",
		down.Format(time.TimeOnly), up.Format(time.TimeOnly), len(missed), missed[0].Format(time.TimeOnly),
		newest.Format(time.TimeOnly), len(all), len(last), len(none))
}
