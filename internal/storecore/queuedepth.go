package storecore

import (
	"context"

	"github.com/starflow/starflow/state"
)

// QueueDepths implements state.Watchdog: one queue_depths aggregate.
func (s *Store) QueueDepths(ctx context.Context, p *state.QueueDepthsParams) ([]*state.QueueDepth, error) {
	out, err := queryAll(ctx, s.reader(), "queue_depths", func(row Row) (*state.QueueDepth, error) {
		var q state.QueueDepth
		return &q, row.Scan(&q.Pool, &q.Count, &q.OldestAgeSeconds)
	}, p.WorkspaceID)
	if err != nil {
		return nil, s.errorf("queue depths: %w", err)
	}
	return out, nil
}
