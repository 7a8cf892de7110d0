package pgstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

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

// ExplainClaim returns the plans of the exact statement ClaimRun runs for p,
// with the same arguments. Operators use it to check that claims walk
// idx_workflow_runs_claim_pool; the tests do.
func (s *Store) ExplainClaim(ctx context.Context, p *state.ClaimRunParams) (*Plan, error) {
	return s.explain(ctx, q("claim_run"), claimArgs(p))
}

// ExplainSweep returns the plans of the exact statement ExpireOldLeases
// selects expired runs with, for p's limit. It should walk
// idx_workflow_runs_lease_until.
func (s *Store) ExplainSweep(ctx context.Context, p *state.ExpireOldLeasesParams) (*Plan, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	return s.explain(ctx, q("expired_leases"), []any{limit})
}

// explain plans query both ways, in a transaction that is rolled back.
// The custom plan is EXPLAIN of the statement with args bound. The generic
// plan comes from a named prepared statement executed under
// plan_cache_mode = force_generic_plan; prepared statements outlive
// transactions, so it is deallocated explicitly.
func (s *Store) explain(ctx context.Context, query string, args []any) (*Plan, error) {
	var plan Plan
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+query, args...).Scan(&plan.Custom); err != nil {
			return fmt.Errorf("custom plan: %w", err)
		}
		const name = "starflow_explain"
		if _, err := tx.Exec(ctx, "PREPARE "+name+" AS "+query); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		defer func() { _, _ = tx.Conn().Exec(context.WithoutCancel(ctx), "DEALLOCATE "+name) }()
		if _, err := tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			return err
		}
		params := ""
		for i := range args {
			if i > 0 {
				params += ", "
			}
			params += fmt.Sprintf("$%d", i+1)
		}
		// EXECUTE takes its arguments as literals: the simple protocol
		// has pgx quote them into the text.
		simple := append([]any{pgx.QueryExecModeSimpleProtocol}, args...)
		if err := tx.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE "+name+"("+params+")", simple...).Scan(&plan.Generic); err != nil {
			return fmt.Errorf("generic plan: %w", err)
		}
		return errRollback
	})
	if err != nil && err != errRollback {
		return nil, fmt.Errorf("pgstore: explain: %w", err)
	}
	return &plan, nil
}

// errRollback ends a read-only transaction of explain by rolling it back.
var errRollback = fmt.Errorf("pgstore: rollback")
