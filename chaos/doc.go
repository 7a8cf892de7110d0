// Package chaos is Starflow's chaos harness (issue 17): it runs a mixed
// workload on a deployment of real processes — a private PostgreSQL
// cluster it starts itself, a NATS JetStream server for the warm tier, a
// `starflow server`, three `starflow worker` processes and a remote job
// worker — while it kills, freezes and restarts them, restarts the
// database, stops NATS, drops LISTEN connections and injects storage
// errors and delays through the fault layer (internal/faultpoint). At the
// end it lets the deployment settle and checks invariants over the
// database, the warm store and the side-effect log (Check), and prints a
// table of what it did and found.
//
// Everything but this file is built only with the chaos build tag:
//
//	go test -tags chaos -run TestChaos ./chaos/ -chaos.duration=2m
//
// The Starflow binary it runs is built with -tags chaos too, which is the
// only build that reads STARFLOW_FAULTS. docs/reliability.md has the
// figures of a 10-minute run and the command that reproduces them.
package chaos
