package storecore

import (
	"context"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// RecentRecoveries implements state.Operator: one statement
// (recent_recoveries) over the partial index of recovery events.
func (s *Store) RecentRecoveries(ctx context.Context, p *state.RecentRecoveriesParams) ([]*starflowtype.RecoveryEvent, error) {
	if p.WorkspaceID == "" {
		return nil, nil
	}
	limit := p.Limit
	if limit <= 0 {
		limit = state.RecentRecoveriesLimitDefault
	}
	limit = min(limit, state.RecentRecoveriesLimitMax)
	rows, err := s.reader().Query(ctx, "recent_recoveries", p.WorkspaceID, p.Env, limit)
	if err != nil {
		return nil, s.errorf("recent recoveries: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.RecoveryEvent
	for rows.Next() {
		var e starflowtype.RecoveryEvent
		if err := scanEvent(rows, &e.Event, &e.Env, &e.WorkflowName); err != nil {
			return nil, s.errorf("recent recoveries: %w", err)
		}
		out = append(out, &e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("recent recoveries: %w", err)
	}
	return out, nil
}
