package starflow_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/state/sqlitestore"
)

// benchSteps is the length of the benchmark workflow.
const benchSteps = 20

func benchDefinition() []byte {
	var b strings.Builder
	b.WriteString("name: bench-context-set\nsteps:\n")
	for i := 0; i < benchSteps; i++ {
		fmt.Fprintf(&b, "  - id: s%02d\n    context_set: {v%02d: \"${{ %d + 1 }}\"}\n", i, i, i)
	}
	return []byte(b.String())
}

// BenchmarkSQLiteContextSet20 runs a 20-step workflow of context_set steps
// through the whole engine (enqueue, claim by the in-process runner, fenced
// ledger writes, checkpoints) on a SQLite file with the default settings.
// Reports steps/s and ns/step; compare with BenchmarkSQLiteRawFloor20.
func BenchmarkSQLiteContextSet20(b *testing.B) {
	forEachSync(b, benchEngine)
}

func benchEngine(b *testing.B, sync string) {
	ctx := context.Background()
	store := openBenchStore(b, sync)
	eng, err := starflow.New(starflow.Config{Store: store, Concurrency: 1, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := eng.Apply(ctx, "bench.yaml", benchDefinition()); err != nil {
		b.Fatal(err)
	}
	if err := eng.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer eng.Stop(ctx)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		run, err := eng.Enqueue(ctx, "bench-context-set", nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		run, err = eng.WaitRun(ctx, run.ID)
		if err != nil || run.Status != "succeeded" {
			b.Fatalf("run %v: %v %s", run.Status, err, run.Error)
		}
	}
	reportSteps(b, time.Since(start))
}

// BenchmarkSQLiteRawFloor20 writes the same rows as one run of
// BenchmarkSQLiteContextSet20 — the same transactions (enqueue, claim,
// start, per step a start and a completion with event and checkpoint, run
// completion), each fenced by the same conditional UPDATE — as hand-written
// SQL on the same connection settings and indexes, with no engine. It is
// the floor the engine is measured against.
func BenchmarkSQLiteRawFloor20(b *testing.B) {
	forEachSync(b, benchFloor)
}

func benchFloor(b *testing.B, sync string) {
	ctx := context.Background()
	store := openBenchStore(b, sync)
	db := store.DB()
	defID := uuid.NewString()
	if _, err := db.ExecContext(ctx, `INSERT INTO workflow_definitions (id, name, revision, spec_json) VALUES (?, 'floor', 'r', '{}')`, defID); err != nil {
		b.Fatal(err)
	}
	const now = `strftime('%Y-%m-%dT%H:%M:%fZ','now')`
	const runner = "floor-runner"
	tx := func(fn func(tx *sql.Tx) error) {
		t, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := fn(t); err != nil {
			t.Rollback()
			b.Fatal(err)
		}
		if err := t.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	fence := func(t *sql.Tx, id string) error {
		res, err := t.ExecContext(ctx, `UPDATE workflow_runs SET updated_at = `+now+` WHERE id = ? AND leased_by = ? AND lease_epoch = 1 AND claim_state IN ('claimed','running')`, id, runner)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return fmt.Errorf("fence matched %d rows", n)
		}
		return nil
	}
	event := func(t *sql.Tx, id, typ, node, payload string) error {
		_, err := t.ExecContext(ctx, `INSERT INTO workflow_run_events (run_id, attempt, event_type, node_id, scope_path, payload_json) VALUES (?, 1, ?, ?, '', ?)`, id, typ, node, payload)
		return err
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		id := uuid.NewString()
		tx(func(t *sql.Tx) error {
			if _, err := t.ExecContext(ctx, `INSERT INTO workflow_runs (id, definition_id, workflow_name, template_id, input_json) VALUES (?, ?, 'floor', 'floor', '{}')`, id, defID); err != nil {
				return err
			}
			return event(t, id, "run_queued", "", "")
		})
		tx(func(t *sql.Tx) error {
			if _, err := t.ExecContext(ctx, `UPDATE workflow_runs SET claim_state = 'claimed', leased_by = ?, lease_until = strftime('%Y-%m-%dT%H:%M:%fZ','now','+30 seconds'), lease_epoch = lease_epoch + 1, claim_attempts = claim_attempts + 1 WHERE id = (SELECT id FROM workflow_runs WHERE claim_state = 'queued' ORDER BY priority DESC, available_at LIMIT 1)`, runner); err != nil {
				return err
			}
			return event(t, id, "run_claimed", "", `{"runner_id":"floor-runner"}`)
		})
		tx(func(t *sql.Tx) error {
			if err := fence(t, id); err != nil {
				return err
			}
			if _, err := t.ExecContext(ctx, `UPDATE workflow_runs SET status = 'running', claim_state = 'running', started_at = `+now+` WHERE id = ?`, id); err != nil {
				return err
			}
			return event(t, id, "run_started", "", `{"lease_epoch":1}`)
		})
		for s := 0; s < benchSteps; s++ {
			step := fmt.Sprintf("s%02d", s)
			tx(func(t *sql.Tx) error {
				if err := fence(t, id); err != nil {
					return err
				}
				if _, err := t.ExecContext(ctx, `INSERT INTO workflow_steps (run_id, attempt, scope_path, step_id, kind, status, tries, started_at, seq) VALUES (?, 1, '', ?, 'context_set', 'running', 1, `+now+`, ?)`, id, step, s+1); err != nil {
					return err
				}
				return event(t, id, "node_start", step, `{"try":1}`)
			})
			tx(func(t *sql.Tx) error {
				if err := fence(t, id); err != nil {
					return err
				}
				if _, err := t.ExecContext(ctx, `UPDATE workflow_steps SET status = 'succeeded', finished_at = `+now+`, duration_ms = 0 WHERE run_id = ? AND attempt = 1 AND scope_path = '' AND step_id = ?`, id, step); err != nil {
					return err
				}
				if err := event(t, id, "node_complete", step, `{"try":1}`); err != nil {
					return err
				}
				kv := fmt.Sprintf(`{"v%02d":%d}`, s, s+1)
				_, err := t.ExecContext(ctx, `INSERT INTO workflow_run_checkpoints (run_id, scope_path, step_id, attempt, context_json, outputs_json) VALUES (?, '', ?, 1, ?, ?)`, id, step, kv, kv)
				return err
			})
		}
		tx(func(t *sql.Tx) error {
			if err := fence(t, id); err != nil {
				return err
			}
			if _, err := t.ExecContext(ctx, `UPDATE workflow_runs SET status = 'succeeded', claim_state = 'complete', output_json = '{}', leased_by = NULL, lease_until = NULL, completed_at = `+now+` WHERE id = ?`, id); err != nil {
				return err
			}
			return event(t, id, "run_succeeded", "", "")
		})
	}
	reportSteps(b, time.Since(start))
}

func reportSteps(b *testing.B, elapsed time.Duration) {
	steps := float64(b.N * benchSteps)
	b.ReportMetric(steps/elapsed.Seconds(), "steps/s")
	b.ReportMetric(float64(elapsed.Nanoseconds())/steps, "ns/step")
}

// forEachSync runs fn as one sub-benchmark per PRAGMA synchronous level:
// FULL (the default; every commit waits for fsync, so disk latency
// dominates) and NORMAL (WAL without fsync per commit, which shows the
// engine's own cost).
func forEachSync(b *testing.B, fn func(b *testing.B, sync string)) {
	for _, sync := range []string{sqlitestore.SynchronousFull, sqlitestore.SynchronousNormal} {
		b.Run("sync="+sync, func(b *testing.B) { fn(b, sync) })
	}
}

func openBenchStore(b *testing.B, sync string) *sqlitestore.Store {
	b.Helper()
	s, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(b.TempDir(), "bench.db"), Synchronous: sync})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}
