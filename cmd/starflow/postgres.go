package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// openPostgres opens and migrates a PostgreSQL store. A `schema` query
// parameter (not a PostgreSQL one) selects the schema Starflow's tables
// live in; it is removed before connecting.
func openPostgres(ctx context.Context, raw string, leaseTTL time.Duration, hooks []state.TxHook, log *slog.Logger) (state.Adapter, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("store URL %q: %w", redactURL(raw), err)
	}
	q := u.Query()
	schema := q.Get("schema")
	q.Del("schema")
	u.RawQuery = q.Encode()
	cfg := pgstore.Config{URL: u.String(), Schema: schema, Hooks: hooks}
	if leaseTTL > 0 {
		// A frozen runner's open transaction must end before its lease
		// does, so its row locks never outlive it.
		cfg.IdleInTransactionTimeout = leaseTTL * 2 / 3
	}
	cfg.Logger = log
	s, err := pgstore.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot open PostgreSQL store %s: %w", redactURL(raw), err)
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("PostgreSQL store %s: %w", redactURL(raw), err)
	}
	return s, nil
}
