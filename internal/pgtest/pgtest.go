// Package pgtest is what the PostgreSQL tests of every package share: the
// database URL and the rule that they skip when PostgreSQL is unreachable,
// except under CI, where they fail (CI must never pass by skipping them).
//
// Import rule: standard library and pgx only; imported by tests only.
package pgtest

import (
	"context"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is the database of the development machines and CI.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL is STARFLOW_TEST_PG_URL, or DefaultURL.
func URL() string {
	if u := os.Getenv("STARFLOW_TEST_PG_URL"); u != "" {
		return u
	}
	return DefaultURL
}

var (
	reachOnce sync.Once
	reachErr  error
)

// Require skips tb when PostgreSQL at URL() cannot be reached, or fails it
// when the CI environment variable is set.
func Require(tb testing.TB) {
	tb.Helper()
	reachOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, URL())
		if err != nil {
			reachErr = err
			return
		}
		reachErr = conn.Ping(ctx)
		_ = conn.Close(ctx)
	})
	if reachErr == nil {
		return
	}
	if os.Getenv("CI") != "" {
		tb.Fatalf("PostgreSQL at %s is not reachable and CI is set, so the PostgreSQL tests may not be skipped: %v", Redacted(URL()), reachErr)
	}
	tb.Skipf("PostgreSQL at %s is not reachable (%v); set STARFLOW_TEST_PG_URL to run the PostgreSQL tests", Redacted(URL()), reachErr)
}

// Redacted is a URL with its password masked, for messages.
func Redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return "STARFLOW_TEST_PG_URL"
	}
	return u.Redacted()
}
