package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/pgstore"
)

// openPostgres opens and migrates a PostgreSQL store. A `schema` query
// parameter (not a PostgreSQL one) selects the schema Starflow's tables
// live in; it is removed before connecting. An invalid schema (empty,
// given twice, not a plain lower-case identifier, too long) is an error
// before anything connects.
func openPostgres(ctx context.Context, raw string, leaseTTL time.Duration, hooks []state.TxHook, log *slog.Logger) (state.Adapter, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("store URL %q: %w", redactURL(raw), err)
	}
	// u.Query() would silently drop a pair it cannot parse (one with a
	// ';', e.g. schema=a;drop): parse it and say so.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("store URL %s: query: %w (a ';' must be written %%3B)", redactURL(raw), err)
	}
	schema, err := schemaParam(q)
	if err != nil {
		return nil, fmt.Errorf("store URL %s: %w", redactURL(raw), err)
	}
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

// schemaParam is the store URL's schema= value ("" when absent), checked:
// present but empty, given more than once, or not a valid schema name
// (pgstore.CheckSchema) is an error naming the parameter.
func schemaParam(q url.Values) (string, error) {
	vs, ok := q["schema"]
	if !ok {
		for k := range q {
			if strings.EqualFold(k, "schema") {
				return "", fmt.Errorf("query parameter %q: the schema parameter is spelt schema= (lower case)", k)
			}
		}
		return "", nil
	}
	if len(vs) != 1 {
		return "", fmt.Errorf("schema= is given %d times; give it once", len(vs))
	}
	if err := pgstore.CheckSchema(vs[0]); err != nil {
		return "", fmt.Errorf("schema=: %w", err)
	}
	return vs[0], nil
}
