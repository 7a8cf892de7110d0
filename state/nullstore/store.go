package nullstore

import (
	"context"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/sqlitestore"
)

// Store is the non-durable adapter. It is safe for concurrent use; Close
// discards everything it holds.
type Store struct {
	*sqlitestore.Store
}

var _ state.Adapter = (*Store)(nil)

// New returns an empty, migrated Store. Opening an in-memory database
// cannot fail but for a broken build (the migrations are embedded), so New
// panics then.
func New() *Store {
	s, err := Open(Config{})
	if err != nil {
		panic(err)
	}
	return s
}

// Config configures Open.
type Config struct {
	// Hooks run inside every write transaction (state.TxHook).
	Hooks []state.TxHook
}

// Open returns an empty, migrated Store with cfg's hooks.
func Open(cfg Config) (*Store, error) {
	s, err := sqlitestore.Open(sqlitestore.Config{Path: sqlitestore.Memory, Hooks: cfg.Hooks})
	if err != nil {
		return nil, fmt.Errorf("nullstore: %w", err)
	}
	if err := s.Migrate(context.Background()); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("nullstore: %w", err)
	}
	return &Store{Store: s}, nil
}

// ListSchedules refuses: schedules need a durable store, since their
// state (the last tick fired) must outlive the process.
func (*Store) ListSchedules(context.Context, *state.ListSchedulesParams) ([]*starflowtype.Schedule, time.Time, error) {
	return nil, time.Time{}, state.ErrSchedulesNeedStore
}

// PauseSchedules refuses (state.ErrSchedulesNeedStore).
func (*Store) PauseSchedules(context.Context, *state.PauseSchedulesParams) ([]*starflowtype.Schedule, error) {
	return nil, state.ErrSchedulesNeedStore
}

// DueSchedules refuses (state.ErrSchedulesNeedStore).
func (*Store) DueSchedules(context.Context, *state.DueSchedulesParams) ([]*starflowtype.Schedule, time.Time, error) {
	return nil, time.Time{}, state.ErrSchedulesNeedStore
}

// FireSchedule refuses (state.ErrSchedulesNeedStore).
func (*Store) FireSchedule(context.Context, *state.FireScheduleParams) (*state.FireResult, error) {
	return nil, state.ErrSchedulesNeedStore
}
