package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/starflow/starflow/bench/internal/sfbench"
	"github.com/starflow/starflow/bench/internal/workload"
)

// cell is the measurements of one variant at one concurrency.
type cell struct {
	results []workload.Result
	errs    []error
}

// stats are the median, min and max steps/s of a cell's measurements.
func (c *cell) stats() (median, lo, hi float64, ok bool) {
	if c == nil || len(c.results) == 0 {
		return 0, 0, 0, false
	}
	v := make([]float64, len(c.results))
	for i, r := range c.results {
		v[i] = r.StepsPerSec()
	}
	slices.Sort(v)
	n := len(v)
	median = v[n/2]
	if n%2 == 0 {
		median = (v[n/2-1] + v[n/2]) / 2
	}
	return median, v[0], v[n-1], true
}

// report collects everything one invocation measured.
type report struct {
	opts        *options
	args        []string
	started     time.Time
	finished    time.Time
	loadStart   string
	loadEnd     string
	env         []string // "name: value" lines about the machine and versions
	checks      []string // durability settings verified at start
	variants    []variant
	notMeasured []notMeasured
	cells       map[string]*cell
	floor       []sfbench.FloorResult
	floorErr    error
	latency     []sfbench.LatencyResult
	recovery    *sfbench.RecoveryResult
	recoveryErr error
}

func newReport(o *options) *report {
	return &report{opts: o, args: os.Args[1:], started: time.Now(), cells: map[string]*cell{}, loadStart: loadavg()}
}

func cellKey(v variant, c int) string { return fmt.Sprintf("%s@%d", v.Key(), c) }

func (r *report) add(v variant, c int, res workload.Result, err error) {
	k := cellKey(v, c)
	if r.cells[k] == nil {
		r.cells[k] = &cell{}
	}
	if err != nil {
		r.cells[k].errs = append(r.cells[k].errs, err)
		return
	}
	r.cells[k].results = append(r.cells[k].results, res)
}

func (r *report) finish() {
	r.finished = time.Now()
	r.loadEnd = loadavg()
}

// failed reports whether any measurement failed.
func (r *report) failed() bool {
	for _, c := range r.cells {
		if len(c.errs) > 0 {
			return true
		}
	}
	if r.floorErr != nil || r.recoveryErr != nil {
		return true
	}
	for _, f := range r.floor {
		if f.Err != nil {
			return true
		}
	}
	for _, l := range r.latency {
		if l.Err != nil {
			return true
		}
	}
	return false
}

// loadavg is the 1, 5 and 15 minute load averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// environment records the machine, the versions and the durability
// settings the stores are opened with.
func (r *report) environment(ctx context.Context) {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				_, cpu, _ = strings.Cut(line, ": ")
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<20))
		}
	}
	r.env = append(r.env, fmt.Sprintf("machine: %d cores (%s)%s, %s/%s", runtime.NumCPU(), strings.TrimSpace(cpu), mem, runtime.GOOS, runtime.GOARCH))
	r.env = append(r.env, "Go: "+runtime.Version())
	if rev, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		dirty := ""
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			dirty = " (with uncommitted changes)"
		}
		r.env = append(r.env, "Starflow: commit "+strings.TrimSpace(string(rev))+dirty)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		var mods []string
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/dbos-inc/dbos-transact-golang", "github.com/cschleiden/go-workflows", "github.com/riverqueue/river",
				"github.com/riverqueue/river/riverdriver/riverpgxv5", "github.com/riverqueue/river/riverdriver/riversqlite",
				"github.com/jackc/pgx/v5", "modernc.org/sqlite":
				mods = append(mods, d.Path+" "+d.Version)
			}
		}
		if len(mods) > 0 {
			r.env = append(r.env, "modules: "+strings.Join(mods, ", "))
		}
	}
	if slices.Contains(r.opts.stores, workload.StorePG) {
		var version, syncCommit, fsync string
		func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			conn, err := workload.PGConnect(ctx, r.opts.pgURL)
			if err != nil {
				r.env = append(r.env, "PostgreSQL: unreachable: "+err.Error())
				return
			}
			defer conn.Close(context.WithoutCancel(ctx))
			_ = conn.QueryRow(ctx, "SHOW server_version").Scan(&version)
			_ = conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&syncCommit)
			_ = conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync)
			r.env = append(r.env, fmt.Sprintf("PostgreSQL %s on loopback (synchronous_commit=%s, fsync=%s); no system under test changes synchronous_commit", version, syncCommit, fsync))
		}()
	}
	if slices.Contains(r.opts.stores, workload.StoreSQLite) {
		dir, err := os.MkdirTemp("", "sbs-pragma-*")
		if err == nil {
			defer os.RemoveAll(dir)
			p := filepath.Join(dir, "x.db")
			for _, c := range []struct{ what, dsn string }{
				{"Starflow/River/DBOS-matched DSN at FULL", workload.SQLiteDSN(p, workload.SyncFull)},
				{"Starflow/River DSN at NORMAL", workload.SQLiteDSN(p, workload.SyncNormal)},
				{"go-workflows default (file:PATH)", "file:" + gowfPath(p, workload.SyncFull)},
				{"go-workflows matched (file:PATH?_pragma=synchronous(NORMAL))", "file:" + gowfPath(p, workload.SyncNormal)},
			} {
				got, err := workload.SQLitePragmaSynchronous(ctx, c.dsn)
				if err != nil {
					got = "error: " + err.Error()
				}
				r.checks = append(r.checks, fmt.Sprintf("%s: PRAGMA synchronous = %s", c.what, got))
			}
		}
	}
}

// starflowMedian is Starflow's median on v's store at v's level and c.
func (r *report) starflowMedian(v variant, c int) (float64, bool) {
	m, _, _, ok := r.cells[cellKey(variant{Sys: sysStarflow, Store: v.Store, Sync: v.Sync}, c)].stats()
	return m, ok
}

// ratio formats a/b.
func ratio(a, b float64) string {
	if b == 0 || math.IsNaN(a/b) {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// num formats a rate with a space between thousands, as docs/benchmarks.md does.
func num(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(' ')
		}
		b.WriteRune(ch)
	}
	return b.String()
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// markdown renders the report.
func (r *report) markdown() string {
	var b strings.Builder
	o := r.opts
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("### Side-by-side run of %s\n\n", r.started.UTC().Format("2006-01-02 15:04 UTC"))
	w("Command: `go run ./cmd/sidebyside %s` (from `bench/`), %s in all.\n", strings.Join(r.args, " "), r.finished.Sub(r.started).Round(time.Second))
	w("Load average (1/5/15 min) at start %s, at end %s.\n\n", r.loadStart, r.loadEnd)
	for _, e := range r.env {
		w("- %s\n", e)
	}
	w("\n#### Durable steps/s: %d no-op steps per run, median of %d (min, max)\n\n", workload.StepsPerRun, o.reps)
	w("Concurrency c = c producers enqueuing while the engine runs and c run slots; time from the first enqueue to the last run's end. ")
	w("Ratio = the system's median over Starflow's on the same store, synchronous level and c.")
	if o.pgConns > 0 {
		w(" Every system on PostgreSQL has a pool of %d connections (`-pg-conns`).", o.pgConns)
	}
	if o.riverCooldown > 0 {
		w(" River's `FetchCooldown` is %v (`-river-fetch-cooldown`).", o.riverCooldown)
	} else if slices.Contains(o.systems, sysRiver) {
		w(" River runs with its default `FetchCooldown` (100 ms between fetches), which bounds one worker to about 7–10 jobs/s: its c=1 figures show that, not its write path (`-river-fetch-cooldown 1ms` raises it).")
	}
	w("\n\n| system | store | sync | settings | c | runs | median steps/s | min | max | ratio to Starflow |\n")
	w("|---|---|---|---|---|---|---|---|---|---|\n")
	for _, v := range r.variants {
		for ci, c := range o.conc {
			cl := r.cells[cellKey(v, c)]
			med, lo, hi, ok := cl.stats()
			row := fmt.Sprintf("| %s | %s | %s | %s | %d | %d | ", v.Sys.Name, v.Store, v.Sync, v.Settings, c, o.runs[ci])
			if !ok {
				errText := "not run"
				if cl != nil && len(cl.errs) > 0 {
					errText = "error: " + strings.ReplaceAll(cl.errs[0].Error(), "|", "/")
				}
				w("%s%s | | | |\n", row, errText)
				continue
			}
			rt := "–"
			if sf, ok := r.starflowMedian(v, c); ok {
				rt = ratio(med, sf)
			}
			extra := ""
			if cl != nil && len(cl.errs) > 0 {
				extra = fmt.Sprintf(" (%d of %d failed)", len(cl.errs), len(cl.errs)+len(cl.results))
			}
			w("%s**%s**%s | %s | %s | %s |\n", row, num(med), extra, num(lo), num(hi), rt)
		}
	}
	for _, n := range r.notMeasured {
		w("\nNot measured: %s on %s: %s.\n", n.System, n.Store, n.Why)
	}

	w("\n#### Acceptance (issue 11)\n\n")
	pick := func(sys *system, store, sync string, c int) (float64, bool) {
		m, _, _, ok := r.cells[cellKey(variant{Sys: sys, Store: store, Sync: sync}, c)].stats()
		return m, ok
	}
	for _, c := range []int{16} {
		if !slices.Contains(o.conc, c) {
			continue
		}
		for _, a := range []struct{ store, sync, what string }{
			{workload.StorePG, "on", "PostgreSQL"},
			{workload.StoreSQLite, workload.SyncNormal, "SQLite at NORMAL (DBOS's default; Starflow at NORMAL)"},
			{workload.StoreSQLite, workload.SyncFull, "SQLite at FULL (Starflow's default; DBOS matched)"},
		} {
			sf, ok1 := pick(sysStarflow, a.store, a.sync, c)
			db, ok2 := pick(sysDBOS, a.store, a.sync, c)
			if ok1 && ok2 {
				w("- Starflow / DBOS at c=%d on %s: **%s×** (%s vs %s steps/s; target ≥ 1.5×)\n", c, a.what, ratio(sf, db), num(sf), num(db))
			}
		}
		for _, f := range r.floor {
			if f.Clients != c || f.Err != nil {
				continue
			}
			if sf, ok := pick(sysStarflow, workload.StorePG, "on", c); ok {
				w("- Starflow / pgbench floor `%s` at %d: **%s×** (%s vs %s steps/s%s)\n", f.Script, c, ratio(sf, f.TPS), num(sf), num(f.TPS),
					map[bool]string{true: "; target ≥ 1.0×", false: ""}[f.Script == "step1tx.sql"])
			}
		}
	}
	for _, l := range r.latency {
		if l.Err == nil {
			w("- Enqueue→first step p99 on %s at %.0f runs/s: **%s** (target < 50 ms)\n", l.Store, l.Rate, ms(l.P99))
		}
	}

	if len(r.floor) > 0 || r.floorErr != nil {
		w("\n#### pgbench floor (PostgreSQL, `pgbench -M prepared`, %v per run, one run each)\n\n", o.pgbenchDur)
		if r.floorErr != nil {
			w("error: %v\n", r.floorErr)
		}
		w("| script | clients | steps/s | Starflow median at that c | Starflow / floor |\n|---|---|---|---|---|\n")
		for _, f := range r.floor {
			if f.Err != nil {
				w("| %s | %d | error: %s | | |\n", f.Script, f.Clients, strings.ReplaceAll(f.Err.Error(), "|", "/"))
				continue
			}
			sf, ok := pick(sysStarflow, workload.StorePG, "on", f.Clients)
			if ok {
				w("| %s | %d | %s | %s | %s |\n", f.Script, f.Clients, num(f.TPS), num(sf), ratio(sf, f.TPS))
			} else {
				w("| %s | %d | %s | – | – |\n", f.Script, f.Clients, num(f.TPS))
			}
		}
		w("\n")
		for _, s := range sfbench.FloorScripts {
			w("- `%s`: %s\n", s.File, s.What)
		}
	}

	if len(r.latency) > 0 {
		w("\n#### Enqueue→first step (Starflow)\n\n")
		w("A steady %.0f runs/s for %v into one engine with %d run slots; workflow of %d step(s), the first a registered custom step that records when its handler starts; latency from just before `Enqueue` (its commit included) to that moment. SQLite at FULL.\n\n",
			o.latencyRate, o.latencyDur, o.latencyConc, o.latencySteps)
		w("| store | runs | p50 | p99 | max |\n|---|---|---|---|---|\n")
		for _, l := range r.latency {
			if l.Err != nil {
				w("| %s | error: %s | | | |\n", l.Store, strings.ReplaceAll(l.Err.Error(), "|", "/"))
				continue
			}
			w("| %s | %d | %s | %s | %s |\n", l.Store, l.Runs, ms(l.P50), ms(l.P99), ms(l.Max))
		}
	}

	if r.recovery != nil {
		rc := o.rec
		w("\n#### Recovery after SIGKILL (Starflow, PostgreSQL)\n\n")
		w("A `starflow server` (lease sweep every %v) and a `starflow worker` (`--concurrency %d --lease-ttl %v --heartbeat %v`); %d runs of a workflow with `recovery_mode: %s` and %d `service_call` steps to a local HTTP counter that holds each call %v; once every run has called it, a second worker starts and the first gets SIGKILL. Time from the SIGKILL to the last run's end (database clock); the counter counts each step's executions by its `Idempotency-Key`.\n\n",
			rc.Sweep, rc.Runs, rc.LeaseTTL, rc.Heartbeat, rc.Runs, rc.Mode, workload.StepsPerRun, rc.StepDelay)
		if r.recoveryErr != nil {
			w("error: %v\n", r.recoveryErr)
		} else {
			rr := r.recovery
			w("| runs unfinished at the SIGKILL | SIGKILL → all %d succeeded | steps executed twice | most executions of one step | executions / steps | runs claimed again (extra claims) |\n|---|---|---|---|---|---|\n", rr.Runs)
			w("| %d | **%.2f s** | **%d** | %d | %d / %d | %d (%d) |\n", rr.InFlight, rr.Recovery.Seconds(), rr.StepsTwice, rr.MaxExecutions,
				rr.Executions, rr.Runs*workload.StepsPerRun, rr.Reclaimed, rr.ExtraClaims)
			if rc.Mode == "resume" {
				w("\nWith `resume`, a step is executed twice when its call was made but its completion was not committed before the SIGKILL: at most one per run unfinished at the kill, unless runs changed hands again (extra claims beyond one per unfinished run: leases lost under load).\n")
			} else {
				w("\nWith `replay` (Starflow's default recovery mode) a re-claimed run starts over, so every step its first attempt had run is executed again.\n")
			}
		}
	}

	w("\n#### What a step is\n\n| system | durable step | driven by |\n|---|---|---|\n")
	for _, s := range o.systems {
		w("| %s | %s | %s |\n", s.Name, s.Step, s.Drive)
	}

	w("\n#### Durability checks\n\nAfter each measurement the harness counts the steps in the system's own tables and fails the measurement unless every step of every run is there:\n\n")
	for _, v := range r.variants {
		for _, c := range o.conc {
			if cl := r.cells[cellKey(v, c)]; cl != nil && len(cl.results) > 0 {
				w("- %s, c=%d: %s\n", v.Key(), c, cl.results[len(cl.results)-1].Checked)
				break
			}
		}
	}
	for _, c := range r.checks {
		w("- %s\n", c)
	}
	return b.String()
}
