// Package securitytest holds the security acceptance suite of issue 10: a
// hostile local user, a hostile service a workflow calls, a hostile HTTP
// client and a careless definition, each tried against the real starflow
// binary, real database files and real HTTP servers.
//
// The suite is split into files by threat: keys_test.go (database file
// modes, wake-key storage), egress_test.go (service_call and notify egress
// policy, redirects), blobs_test.go (forged blob references), numbers_test.go
// (non-finite numbers), secrets_test.go (secret fragments in stored text),
// listener_test.go (timeouts, Host check, health text, wake rate limit) and
// limits_test.go (caps on definitions, inputs, payloads and loops).
//
// The starflow binary is built once per test binary (TestMain, without
// -race) into a temporary folder; tests that need it call Binary(t). One
// harness (harness_test.go) serves every file: runStarflow runs the binary
// to completion, startStarflow and startListener start it as a
// long-running process, writeFile, newNotifySink, sqliteCells and pgCells
// (every value of a database), queryRow and pgSchema (a fresh PostgreSQL
// schema).
//
// Import rule: the tests import the public packages (starflow,
// starflowtype, state, the stores), internal test helpers (pgtest,
// internal/egress/egresstest) and internal/waketoken (to read key files and
// sign candidate tokens); nothing imports this package.
package securitytest
