package sfbench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/starflow/starflow/bench/internal/workload"
	"github.com/starflow/starflow/state/pgstore"
)

// FloorScripts are the pgbench scripts of bench/pgbench, in report order.
var FloorScripts = []struct{ File, What string }{
	{"step.sql", "the writes before issue 11: 2 transactions per step (bench/pgbench/step.sql)"},
	{"step1tx.sql", "the floor of today's write path: one transaction per step, 1 update + 3 inserts (bench/pgbench/step1tx.sql)"},
}

// FloorResult is one pgbench run: steps/s of a script at a client count.
type FloorResult struct {
	Script  string
	Clients int
	TPS     float64
	Err     error
}

// seededRuns is how many leased runs seed.sql creates: one per client.
const seededRuns = 256

var tpsLine = regexp.MustCompile(`(?m)^tps = ([0-9.]+)`)

// Pgbench runs each floor script with pgbench (prepared statements) at
// each client count for dur, on a fresh schema migrated by Starflow and
// seeded with seed.sql. dir holds the scripts. progress (if not nil) is
// called after each pgbench run.
func Pgbench(ctx context.Context, pgURL, dir string, clients []int, dur time.Duration, progress func(FloorResult)) ([]FloorResult, error) {
	if _, err := exec.LookPath("pgbench"); err != nil {
		return nil, fmt.Errorf("pgbench is not installed (Debian: postgresql-client): %w", err)
	}
	for _, c := range clients {
		if c < 1 || c > seededRuns {
			return nil, fmt.Errorf("pgbench: %d clients; seed.sql leases runs for 1 to %d", c, seededRuns)
		}
	}
	seed, err := os.ReadFile(filepath.Join(dir, "seed.sql"))
	if err != nil {
		return nil, err
	}
	schema := workload.NewName("sbs_pgbench")
	store, err := pgstore.Open(ctx, pgstore.Config{URL: pgURL, Schema: schema})
	if err != nil {
		return nil, err
	}
	defer func() { _ = workload.DropSchema(ctx, pgURL, schema) }()
	err = store.Migrate(ctx)
	store.Close()
	if err != nil {
		return nil, err
	}
	if err := workload.PGExec(ctx, pgURL, "SET search_path = "+pgx.Identifier{schema}.Sanitize()+";\n"+string(seed)); err != nil {
		return nil, fmt.Errorf("seed.sql: %w", err)
	}
	secs := max(1, int(dur.Round(time.Second).Seconds()))
	var out []FloorResult
	for _, s := range FloorScripts {
		for _, c := range clients {
			r := FloorResult{Script: s.File, Clients: c}
			cmd := exec.CommandContext(ctx, "pgbench", "-n", "-M", "prepared", "-f", filepath.Join(dir, s.File),
				"-c", strconv.Itoa(c), "-j", strconv.Itoa(c), "-T", strconv.Itoa(secs), pgURL)
			cmd.Env = append(os.Environ(), "PGOPTIONS=-c client_min_messages=warning -c search_path="+schema)
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Run(); err != nil {
				r.Err = fmt.Errorf("pgbench %s -c %d: %w: %s", s.File, c, err, tail(buf.String(), 400))
			} else if m := tpsLine.FindStringSubmatch(buf.String()); m == nil {
				r.Err = fmt.Errorf("pgbench %s -c %d: no tps line in: %s", s.File, c, tail(buf.String(), 400))
			} else {
				r.TPS, _ = strconv.ParseFloat(m[1], 64)
			}
			if progress != nil {
				progress(r)
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
