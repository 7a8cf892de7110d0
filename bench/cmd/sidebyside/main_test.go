package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/bench/internal/workload"
)

func TestParseFlagsQuickKeepsExplicitFlags(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-reps", "2", "-pgbench=false"})
	if err != nil {
		t.Fatal(err)
	}
	if o.reps != 2 {
		t.Fatalf("-reps 2 with -quick gave %d", o.reps)
	}
	if got := o.runs; len(got) != 3 || got[0] != 4 || got[1] != 32 || got[2] != 64 {
		t.Fatalf("-quick runs = %v, want [4 32 64]", got)
	}
	if o.latencyDur != 2*time.Second || o.rec.Runs != 20 {
		t.Fatalf("-quick latency %v, recovery runs %d", o.latencyDur, o.rec.Runs)
	}
}

func TestParseFlagsRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-c", "1,16", "-runs", "10", "-pgbench=false"}, "-runs has 1 values and -c 2"},
		{[]string{"-c", "16", "-runs", "8", "-pgbench=false"}, "8 runs at concurrency 16"},
		{[]string{"-systems", "temporal", "-pgbench=false"}, `unknown system "temporal"`},
		{[]string{"-stores", "mysql", "-pgbench=false"}, `unknown store "mysql"`},
		{[]string{"-c", "1,x", "-pgbench=false"}, `"x" is not an integer`},
		{[]string{"-recovery-mode", "manual", "-pgbench=false"}, "-recovery-mode must be resume or replay"},
	} {
		_, err := parseFlags(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestPlanSkipsGoWorkflowsOnPostgres(t *testing.T) {
	vs, nm := plan(allSystems, []string{workload.StorePG, workload.StoreSQLite})
	for _, v := range vs {
		if v.Sys == sysGoWorkflows && v.Store == workload.StorePG {
			t.Fatal("go-workflows planned on PostgreSQL")
		}
	}
	if len(nm) != 1 || nm[0].System != "go-workflows" {
		t.Fatalf("not measured = %+v", nm)
	}
	// PostgreSQL: starflow, dbos, river; SQLite: two levels for each of four.
	if len(vs) != 3+8 {
		t.Fatalf("%d variants planned, want 11", len(vs))
	}
}

func TestCellStats(t *testing.T) {
	mk := func(stepsPerSec ...float64) *cell {
		c := &cell{}
		for _, v := range stepsPerSec {
			c.results = append(c.results, workload.Result{Elapsed: time.Second, Steps: int(v)})
		}
		return c
	}
	if m, lo, hi, _ := mk(300, 100, 200).stats(); m != 200 || lo != 100 || hi != 300 {
		t.Fatalf("odd: %v %v %v", m, lo, hi)
	}
	if m, _, _, _ := mk(100, 400, 200, 300).stats(); m != 250 {
		t.Fatalf("even: median %v, want 250", m)
	}
	if _, _, _, ok := (*cell)(nil).stats(); ok {
		t.Fatal("a missing cell has stats")
	}
}

func TestNum(t *testing.T) {
	for in, want := range map[float64]string{7: "7", 1202: "1 202", 1234567: "1 234 567", 999.6: "1 000"} {
		if got := num(in); got != want {
			t.Errorf("num(%v) = %q, want %q", in, got, want)
		}
	}
}

// TestPeersRunAndCheckDurability runs every peer briefly on every store it
// supports: each measurement must complete and find every step in the
// peer's own tables.
func TestPeersRunAndCheckDurability(t *testing.T) {
	pg := pgURLForTest(t)
	vs, _ := plan([]*system{sysDBOS, sysGoWorkflows, sysRiver}, []string{workload.StoreSQLite, workload.StorePG})
	for _, v := range vs {
		t.Run(v.Key(), func(t *testing.T) {
			if v.Store == workload.StorePG && pg == "" {
				t.Skip("PostgreSQL unreachable")
			}
			rc := workload.RunConfig{Concurrency: 3, Runs: 7, Store: v.Store, PGURL: pg, PGConns: 5, Dir: t.TempDir(),
				RiverFetchCooldown: 5 * time.Millisecond}
			if v.Store == workload.StoreSQLite {
				rc.Sync = v.Sync
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := v.Sys.Run(ctx, rc)
			if err != nil {
				t.Fatal(err)
			}
			if res.Steps != 70 || res.Checked == "" {
				t.Fatalf("got %+v, want 70 steps and a durability check", res)
			}
		})
	}
}

// pgURLForTest is the test database, or "" when it is unreachable (a
// failure under CI=true).
func pgURLForTest(t *testing.T) string {
	t.Helper()
	o, err := parseFlags([]string{"-pgbench=false"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := workload.PGConnect(ctx, o.pgURL)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL unreachable: %v", err)
		}
		return ""
	}
	conn.Close(ctx)
	return o.pgURL
}
