package pgstore

// The EXPLAIN helpers of the plan tests (explain_test.go, listplan_test.go,
// …): methods of Store compiled into the test binary only.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/state"
)

// Plan is how PostgreSQL would run one of the adapter's statements, as
// EXPLAIN (FORMAT JSON) prints it. Nothing is executed to obtain it.
type Plan struct {
	// Custom is the plan for the given parameter values: what the first
	// executions of a prepared statement use.
	Custom json.RawMessage
	// Generic is the parameter-independent plan PostgreSQL may switch a
	// prepared statement to after five executions (pgx prepares and
	// caches every statement, so this is the plan a busy runner ends up
	// with).
	Generic json.RawMessage
}

// ExplainClaim returns the plans of the exact statement ClaimRun runs for p
// (with p.Start, the claim that starts its runs), with the same arguments.
// The tests check with it that claims walk idx_workflow_runs_claim_pool.
func (s *Store) ExplainClaim(ctx context.Context, p *state.ClaimRunParams) (*Plan, error) {
	args := storecore.ClaimArgs(p, 1)
	for i, a := range args {
		args[i] = (*dialect)(nil).Arg(a)
	}
	name := "claim_run"
	if p.Start {
		name += "_start"
		args = append(args, storecore.ClaimStartArg(p))
	}
	return s.explain(ctx, query(name), args)
}

// ExplainSweep returns the plans of the exact statement ExpireOldLeases
// selects expired runs with, for p's limit. It should walk
// idx_workflow_runs_lease_until.
func (s *Store) ExplainSweep(ctx context.Context, p *state.ExpireOldLeasesParams) (*Plan, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	return s.explain(ctx, query("expired_leases"), []any{limit})
}

// ExplainListRuns returns the plans of the exact statement ListRuns runs
// for p, with the same arguments: a workspace's listing should read
// idx_workflow_runs_workspace_list in order from the page's position, a
// status listing idx_workflow_runs_workspace_status_list, a parent's
// idx_workflow_runs_parent. Nil when p can match no run (ListRuns then
// runs nothing).
func (s *Store) ExplainListRuns(ctx context.Context, p *state.ListRunsParams) (*Plan, error) {
	name, args, err := storecore.ListRunsQuery(p, (*dialect)(nil).TimePrecision())
	if err != nil || name == "" {
		return nil, err
	}
	return s.explain(ctx, query(name), bound(args))
}

// ExplainFindRunIDs returns the plans of the exact statement FindRunIDs
// runs for p: a range of workflow_runs_pkey.
func (s *Store) ExplainFindRunIDs(ctx context.Context, p *state.FindRunIDsParams) (*Plan, error) {
	lo, hi, err := storecore.IDRange(p.Prefix)
	if err != nil {
		return nil, err
	}
	limit := p.Limit
	if limit <= 0 {
		limit = storecore.FindRunIDsLimitDefault
	}
	return s.explain(ctx, query("find_run_ids"), []any{lo, hi, p.WorkspaceID, limit})
}

// ExplainStuckCounts returns the plans of the exact statement StuckCounts
// runs (with the default age buckets): it should find the workspaces by
// probing idx_workflow_runs_workspace_list and read each one's unfinished
// runs from idx_workflow_runs_workspace_status_list, never scanning
// workflow_runs.
func (s *Store) ExplainStuckCounts(ctx context.Context, p *state.StuckCountsParams) (*Plan, error) {
	buckets := p.Buckets
	if buckets == nil {
		buckets = []float64{}
	}
	return s.explain(ctx, query("stuck_counts"), []any{buckets})
}

// ExplainRecentRecoveries returns the plans of the exact statement
// RecentRecoveries runs for p: it should read
// idx_workflow_run_events_recovery in order (no sort, no scan of the
// events table) and each run by workflow_runs_pkey.
func (s *Store) ExplainRecentRecoveries(ctx context.Context, p *state.RecentRecoveriesParams) (*Plan, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = state.RecentRecoveriesLimitDefault
	}
	return s.explain(ctx, query("recent_recoveries"), []any{p.WorkspaceID, p.Env, min(limit, state.RecentRecoveriesLimitMax)})
}

// bound converts arguments as the store binds them: a zero time is NULL.
func bound(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if t, ok := a.(time.Time); ok && t.IsZero() {
			continue
		}
		out[i] = (*dialect)(nil).Arg(a)
	}
	return out
}

// explain plans query both ways on one connection of the pool. The custom
// plan is EXPLAIN of the statement with args bound (EXPLAIN without ANALYZE
// executes nothing). The generic plan comes from a named prepared statement
// executed under plan_cache_mode = force_generic_plan (SET LOCAL, in a
// transaction that is rolled back). A prepared statement outlives
// transactions, so it is deallocated explicitly; if anything fails once it
// exists, the connection is closed rather than returned to the pool with
// it.
func (s *Store) explain(ctx context.Context, query string, args []any) (*Plan, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("pgstore: explain: %w", err)
	}
	defer conn.Release()
	var plan Plan
	if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&plan.Custom); err != nil {
		return nil, fmt.Errorf("pgstore: explain: custom plan: %w", err)
	}
	const name = "starflow_explain"
	if _, err := conn.Exec(ctx, "PREPARE "+name+" AS "+query); err != nil {
		return nil, fmt.Errorf("pgstore: explain: prepare: %w", err)
	}
	clean := false
	defer func() {
		if !clean {
			_ = conn.Conn().Close(context.WithoutCancel(ctx))
		}
	}()
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		params := make([]string, len(args))
		for i := range args {
			params[i] = fmt.Sprintf("$%d", i+1)
		}
		// EXECUTE takes its arguments as literals: the simple protocol
		// has pgx quote them into the text.
		simple := append([]any{pgx.QueryExecModeSimpleProtocol}, args...)
		sql := "EXPLAIN (FORMAT JSON) EXECUTE " + name + "(" + strings.Join(params, ", ") + ")"
		if err := tx.QueryRow(ctx, sql, simple...).Scan(&plan.Generic); err != nil {
			return err
		}
		return errRollback
	})
	if err != nil && !errors.Is(err, errRollback) {
		return nil, fmt.Errorf("pgstore: explain: generic plan: %w", err)
	}
	if _, err := conn.Exec(ctx, "DEALLOCATE "+name); err != nil {
		return nil, fmt.Errorf("pgstore: explain: deallocate: %w", err)
	}
	clean = true
	return &plan, nil
}

// errRollback ends explain's transaction by rolling it back.
var errRollback = errors.New("pgstore: rollback")
