// Package crashtest holds the real-process acceptance tests of the
// multi-runner PostgreSQL deployment (issue 3): `starflow worker` and
// `starflow server` processes on one PostgreSQL, killed with SIGKILL,
// frozen with SIGSTOP past their lease and continued with SIGCONT, or
// stopped gracefully with SIGTERM, while a side-effects service in the test
// process records every service_call and refuses those that carry a
// superseded fencing epoch.
//
// The package has no code of its own outside its tests. The starflow binary
// is built once per test binary, without -race (a race build slows
// heartbeats enough to cause false lease loss). Each test works in a
// PostgreSQL schema of its own, dropped at cleanup, on the database named by
// STARFLOW_TEST_PG_URL (default postgres://postgres@127.0.0.1:5432/test).
// Without a reachable PostgreSQL the tests skip, except when the CI
// variable is set: then they fail.
//
// The durable-wait acceptance tests (issue 5, waits_*_test.go) work on a
// SQLite file instead, with `starflow worker` and `starflow dev` processes
// and the CLI (`starflow signal`) on the same file: timers that fall due
// while every process is down, signals that arrive before their wait, a
// crash at each commit boundary of entering a wait, and concurrent wakes
// with one token. They need no PostgreSQL.
//
// Import rule: the tests import the public packages (starflow,
// starflowtype, state, state/pgstore, state/sqlitestore) and pgx; nothing
// imports this package.
package crashtest
