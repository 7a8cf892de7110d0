// Command sidebyside measures Starflow side by side with peer durable
// execution systems on this machine, in one invocation, and prints a
// markdown report for docs/benchmarks.md (issue 11):
//
//   - durable steps/s of a workflow of 10 no-op durable steps at
//     concurrency 1, 16 and 64, on PostgreSQL and on SQLite, for Starflow,
//     DBOS Transact Go, go-workflows and River, each figure the median of
//     -reps runs with min and max;
//   - the pgbench floor of Starflow's own per-step writes (bench/pgbench);
//   - Starflow's enqueue→first-step latency at a steady enqueue rate;
//   - recovery after SIGKILL of a `starflow worker` with runs in flight.
//
// It uses only the systems' public Go APIs. Usage (from bench/):
//
//	go run ./cmd/sidebyside            # the full run (< 15 min on 2 cores)
//	go run ./cmd/sidebyside -quick     # a smoke run (about a minute)
//
// Concurrency c means c producers enqueuing while the engine runs and c
// run slots (c workers). Time is from the first enqueue to the last run's
// end. See docs/benchmarks.md, "Side by side with peers (issue 11)".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/starflow/starflow/bench/internal/sfbench"
	"github.com/starflow/starflow/bench/internal/workload"
)

// system is one durable execution system under test.
type system struct {
	Name string
	// Step is what one durable step is in this system.
	Step string
	// Drive is how the harness feeds it runs.
	Drive string
	Run   func(ctx context.Context, rc workload.RunConfig) (workload.Result, error)
}

var (
	sysStarflow = &system{Name: "starflow",
		Step:  "a `context_set` step: one fenced write (`OnNodeComplete` with `WithStart`: ledger row, `node_start` and `node_complete` events, checkpoint), group-committed with the other runs' writes of the moment",
		Drive: "`Enqueue` from c producers; engine `Concurrency` c; `WaitRun`",
		Run:   sfbench.Run}
	sysDBOS = &system{Name: "dbos",
		Step:  "`dbos.RunAsStep` of a no-op function (one `operation_outputs` row)",
		Drive: "direct mode: c producers each `RunWorkflow` then `GetResult` (c workflows in flight)",
		Run:   runDBOS}
	sysGoWorkflows = &system{Name: "go-workflows",
		Step:  "an activity, `workflow.ExecuteActivity(...).Get` (scheduled/completed events in the history, a workflow task between activities)",
		Drive: "`CreateWorkflowInstance` from c producers; one worker, `MaxParallelWorkflowTasks` = `MaxParallelActivityTasks` = c; monoprocess backend",
		Run:   runGoWorkflows}
	sysRiver = &system{Name: "river",
		Step:  "one job per run with 10 `river.ResumableStep`s, each committing its checkpoint with `ResumableSetStepTx` in its own transaction",
		Drive: "`Insert` from c producers; `MaxWorkers` c on the default queue; `JobCompleted` events",
		Run:   runRiver}
	allSystems = []*system{sysStarflow, sysDBOS, sysGoWorkflows, sysRiver}
)

// variant is a system on a store at a durability setting.
type variant struct {
	Sys      *system
	Store    string
	Sync     string // SQLite: FULL or NORMAL; PostgreSQL: "on" (synchronous_commit)
	Settings string // how this setting relates to the system's default
}

// Key identifies the variant in the report.
func (v variant) Key() string { return v.Sys.Name + "/" + v.Store + "/" + v.Sync }

// notMeasured is a system/store pair the harness cannot measure, and why.
type notMeasured struct{ System, Store, Why string }

// plan returns the variants to measure for the chosen systems and stores.
func plan(systems []*system, stores []string) ([]variant, []notMeasured) {
	var vs []variant
	var nm []notMeasured
	has := func(s *system) bool {
		for _, x := range systems {
			if x == s {
				return true
			}
		}
		return false
	}
	for _, store := range stores {
		switch store {
		case workload.StorePG:
			for _, s := range systems {
				if s == sysGoWorkflows {
					nm = append(nm, notMeasured{s.Name, workload.StorePG, "v1.2.0 has no PostgreSQL backend (SQLite, MySQL and Redis only)"})
					continue
				}
				vs = append(vs, variant{s, workload.StorePG, "on", "default (server `synchronous_commit=on`)"})
			}
		case workload.StoreSQLite:
			if has(sysStarflow) {
				vs = append(vs, variant{sysStarflow, workload.StoreSQLite, workload.SyncFull, "default (WAL, FULL)"},
					variant{sysStarflow, workload.StoreSQLite, workload.SyncNormal, "`sqlitestore.Config.Synchronous = NORMAL`"})
			}
			if has(sysDBOS) {
				vs = append(vs, variant{sysDBOS, workload.StoreSQLite, workload.SyncNormal, "default (WAL, NORMAL)"},
					variant{sysDBOS, workload.StoreSQLite, workload.SyncFull, "matched: own handle, WAL, FULL"})
			}
			if has(sysGoWorkflows) {
				vs = append(vs, variant{sysGoWorkflows, workload.StoreSQLite, workload.SyncFull, "default (WAL, SQLite's FULL)"},
					variant{sysGoWorkflows, workload.StoreSQLite, workload.SyncNormal, "matched: `_pragma=synchronous(NORMAL)`"})
			}
			if has(sysRiver) {
				vs = append(vs, variant{sysRiver, workload.StoreSQLite, workload.SyncFull, "WAL, FULL (River sets no pragma: the DSN decides)"},
					variant{sysRiver, workload.StoreSQLite, workload.SyncNormal, "WAL, NORMAL"})
			}
		}
	}
	return vs, nm
}

// options are the command's flags.
type options struct {
	quick         bool
	reps          int
	conc          []int
	runs          []int
	systems       []*system
	stores        []string
	pgURL         string
	pgConns       int
	riverCooldown time.Duration
	timeout       time.Duration
	pgbench       bool
	pgbenchDir    string
	pgbenchDur    time.Duration
	latency       bool
	latencyRate   float64
	latencyDur    time.Duration
	latencySteps  int
	latencyConc   int
	recovery      bool
	rec           sfbench.RecoveryConfig
	out           string
}

func parseFlags(args []string) (*options, error) {
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	o := &options{}
	var conc, runs, systems, stores string
	defPG := os.Getenv("STARFLOW_TEST_PG_URL")
	if defPG == "" {
		defPG = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	fs.BoolVar(&o.quick, "quick", false, "smoke mode: 1 rep, few runs, short pgbench/latency/recovery (about a minute); explicit flags still win")
	fs.IntVar(&o.reps, "reps", 3, "measurements per figure (the table shows their median, min and max)")
	fs.StringVar(&conc, "c", "1,16,64", "concurrency levels (producers = run slots)")
	fs.StringVar(&runs, "runs", "40,320,640", "runs (of 10 steps) per measurement, one per concurrency level")
	fs.StringVar(&systems, "systems", "starflow,dbos,go-workflows,river", "systems to measure")
	fs.StringVar(&stores, "stores", "postgres,sqlite", "stores to measure on")
	fs.StringVar(&o.pgURL, "pg", defPG, "PostgreSQL database (each system gets a schema of its own, dropped after; env STARFLOW_TEST_PG_URL)")
	fs.IntVar(&o.pgConns, "pg-conns", 20, "connection pool size of every system on PostgreSQL (DBOS's default; Starflow's and a plain pgxpool's default is 4 on 2 cores); 0 = each system's default")
	fs.DurationVar(&o.riverCooldown, "river-fetch-cooldown", 0, "River's FetchCooldown (0 = River's default, 100ms, which bounds one worker to ~7–10 jobs/s)")
	fs.DurationVar(&o.timeout, "timeout", 3*time.Minute, "limit of one measurement")
	fs.BoolVar(&o.pgbench, "pgbench", true, "run the pgbench floor (PostgreSQL)")
	fs.StringVar(&o.pgbenchDir, "pgbench-dir", "", "directory of the pgbench scripts (default: pgbench or bench/pgbench, whichever exists)")
	fs.DurationVar(&o.pgbenchDur, "pgbench-duration", 5*time.Second, "duration of each pgbench run")
	fs.BoolVar(&o.latency, "latency", true, "measure Starflow's enqueue→first-step latency")
	fs.Float64Var(&o.latencyRate, "latency-rate", 100, "enqueue rate of the latency measurement, runs/s")
	fs.DurationVar(&o.latencyDur, "latency-duration", 10*time.Second, "duration of the latency measurement (per store)")
	fs.IntVar(&o.latencySteps, "latency-steps", 1, "steps of the latency workflow (the marking step, then context_set steps)")
	fs.IntVar(&o.latencyConc, "latency-c", 16, "run slots of the latency measurement")
	fs.BoolVar(&o.recovery, "recovery", true, "measure recovery after SIGKILL of a worker (PostgreSQL)")
	fs.IntVar(&o.rec.Runs, "recovery-runs", 100, "runs in flight on the killed worker")
	fs.DurationVar(&o.rec.LeaseTTL, "recovery-lease-ttl", 5*time.Second, "workers' --lease-ttl in the recovery measurement")
	fs.DurationVar(&o.rec.Heartbeat, "recovery-heartbeat", time.Second, "workers' --heartbeat in the recovery measurement")
	fs.DurationVar(&o.rec.Sweep, "recovery-sweep", time.Second, "server's --sweep-interval in the recovery measurement")
	fs.DurationVar(&o.rec.StepDelay, "recovery-step-delay", 200*time.Millisecond, "how long each step's HTTP call takes in the recovery measurement")
	fs.StringVar(&o.rec.Mode, "recovery-mode", "resume", "the recovery workflow's recovery_mode: resume (committed steps are restored, not run again) or replay (Starflow's default: the run starts over)")
	fs.StringVar(&o.rec.Binary, "starflow-bin", "", "starflow binary for the recovery measurement (default: go build ./cmd/starflow of the module in use)")
	fs.StringVar(&o.out, "out", "", "also write the markdown report to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		quick := map[string]func(){
			"reps":             func() { o.reps = 1 },
			"runs":             func() { runs = "4,32,64" },
			"pgbench-duration": func() { o.pgbenchDur = time.Second },
			"latency-duration": func() { o.latencyDur = 2 * time.Second },
			"recovery-runs":    func() { o.rec.Runs = 20 },
			"recovery-lease-ttl": func() {
				o.rec.LeaseTTL = 2 * time.Second
			},
			"recovery-heartbeat":  func() { o.rec.Heartbeat = 500 * time.Millisecond },
			"recovery-step-delay": func() { o.rec.StepDelay = 100 * time.Millisecond },
		}
		for name, apply := range quick {
			if !set[name] {
				apply()
			}
		}
	}
	var err error
	if o.conc, err = intList("-c", conc); err != nil {
		return nil, err
	}
	if o.runs, err = intList("-runs", runs); err != nil {
		return nil, err
	}
	if len(o.runs) != len(o.conc) {
		return nil, fmt.Errorf("-runs has %d values and -c %d: give one run count per concurrency level", len(o.runs), len(o.conc))
	}
	for i, c := range o.conc {
		if c < 1 {
			return nil, fmt.Errorf("-c: concurrency must be at least 1, got %d", c)
		}
		if o.runs[i] < c {
			return nil, fmt.Errorf("-runs: %d runs at concurrency %d leave producers idle; give at least %d", o.runs[i], c, c)
		}
	}
	if o.reps < 1 {
		return nil, fmt.Errorf("-reps must be at least 1, got %d", o.reps)
	}
	for _, name := range splitList(systems) {
		var found *system
		for _, s := range allSystems {
			if s.Name == name {
				found = s
			}
		}
		if found == nil {
			return nil, fmt.Errorf("-systems: unknown system %q (known: starflow, dbos, go-workflows, river)", name)
		}
		o.systems = append(o.systems, found)
	}
	for _, s := range splitList(stores) {
		if s != workload.StorePG && s != workload.StoreSQLite {
			return nil, fmt.Errorf("-stores: unknown store %q (known: postgres, sqlite)", s)
		}
		o.stores = append(o.stores, s)
	}
	if o.latencyRate <= 0 {
		return nil, fmt.Errorf("-latency-rate must be positive, got %v", o.latencyRate)
	}
	if o.latencySteps < 1 {
		return nil, fmt.Errorf("-latency-steps must be at least 1, got %d", o.latencySteps)
	}
	if o.rec.Mode != "resume" && o.rec.Mode != "replay" {
		return nil, fmt.Errorf("-recovery-mode must be resume or replay, got %q", o.rec.Mode)
	}
	if o.rec.Runs < 1 {
		return nil, fmt.Errorf("-recovery-runs must be at least 1, got %d", o.rec.Runs)
	}
	if o.pgbench && o.pgbenchDir == "" {
		for _, d := range []string{"pgbench", "bench/pgbench"} {
			if _, err := os.Stat(d + "/step.sql"); err == nil {
				o.pgbenchDir = d
				break
			}
		}
		if o.pgbenchDir == "" {
			return nil, fmt.Errorf("pgbench scripts not found in ./pgbench or ./bench/pgbench: run from bench/ or give -pgbench-dir")
		}
	}
	o.rec.PGURL = o.pgURL
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func intList(flagName, s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an integer", flagName, f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no values", flagName)
	}
	return out, nil
}

// logf prints progress on stderr.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func fmtRate(v float64, err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("%.0f steps/s", v)
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err == flag.ErrHelp {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(2)
	}
	rep := run(context.Background(), o)
	md := rep.markdown()
	fmt.Print(md)
	if o.out != "" {
		if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "sidebyside:", err)
			os.Exit(1)
		}
	}
	if rep.failed() {
		os.Exit(1)
	}
}

// run takes every measurement the options ask for.
func run(ctx context.Context, o *options) *report {
	rep := newReport(o)
	variants, nm := plan(o.systems, o.stores)
	rep.variants, rep.notMeasured = variants, nm
	rep.environment(ctx)

	total := o.reps * len(o.conc) * len(variants)
	k := 0
	for r := 0; r < o.reps; r++ {
		for ci, c := range o.conc {
			// Rotate the order each rep so no variant always runs first
			// (or right after the same neighbour).
			for j := range variants {
				v := variants[(j+r)%len(variants)]
				k++
				res, err := measure(ctx, o, v, c, o.runs[ci])
				rep.add(v, c, res, err)
				if err != nil {
					logf("[%d/%d] %s c=%d rep %d: error: %v", k, total, v.Key(), c, r+1, err)
				} else {
					logf("[%d/%d] %s c=%d rep %d: %.0f steps/s (%d runs in %.2fs; %s)", k, total, v.Key(), c, r+1,
						res.StepsPerSec(), res.Steps/workload.StepsPerRun, res.Elapsed.Seconds(), res.Checked)
				}
			}
		}
	}
	hasPG := false
	for _, s := range o.stores {
		hasPG = hasPG || s == workload.StorePG
	}
	if o.pgbench && hasPG {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		rep.floor, rep.floorErr = sfbench.Pgbench(ctx, o.pgURL, o.pgbenchDir, o.conc, o.pgbenchDur, func(f sfbench.FloorResult) {
			logf("pgbench %s c=%d: %s", f.Script, f.Clients, fmtRate(f.TPS, f.Err))
		})
		cancel()
		if rep.floorErr != nil {
			logf("pgbench: error: %v", rep.floorErr)
		}
	}
	if o.latency {
		for _, store := range o.stores {
			dir, err := os.MkdirTemp("", "sbs-latency-*")
			if err != nil {
				rep.latency = append(rep.latency, sfbench.LatencyResult{Store: store, Err: err})
				continue
			}
			ctx, cancel := context.WithTimeout(ctx, o.latencyDur+o.timeout)
			rc := workload.RunConfig{Concurrency: o.latencyConc, Store: store, PGURL: o.pgURL, PGConns: o.pgConns, Dir: dir}
			if store == workload.StoreSQLite {
				rc.Sync = workload.SyncFull
			}
			l := sfbench.Latency(ctx, rc, o.latencyRate, o.latencyDur, o.latencySteps)
			cancel()
			os.RemoveAll(dir)
			rep.latency = append(rep.latency, l)
			if l.Err != nil {
				logf("latency %s: error: %v", store, l.Err)
			} else {
				logf("latency %s: p50 %v p99 %v max %v (%d runs)", store, l.P50, l.P99, l.Max, l.Runs)
			}
		}
	}
	if o.recovery && hasPG {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		res, err := sfbench.Recovery(ctx, o.rec)
		cancel()
		rep.recovery, rep.recoveryErr = &res, err
		if err != nil {
			logf("recovery: error: %v", err)
		} else {
			logf("recovery: %v after SIGKILL, %d steps executed twice", res.Recovery, res.StepsTwice)
		}
	}
	rep.finish()
	return rep
}

// measure takes one measurement of v at concurrency c with runs runs.
func measure(ctx context.Context, o *options, v variant, c, runs int) (workload.Result, error) {
	dir, err := os.MkdirTemp("", "sbs-*")
	if err != nil {
		return workload.Result{}, err
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rc := workload.RunConfig{Concurrency: c, Runs: runs, Store: v.Store, PGURL: o.pgURL, PGConns: o.pgConns, Dir: dir,
		RiverFetchCooldown: o.riverCooldown}
	if v.Store == workload.StoreSQLite {
		rc.Sync = v.Sync
	}
	return v.Sys.Run(ctx, rc)
}
