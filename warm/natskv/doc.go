// Package natskv is the NATS JetStream key-value warm store (SPEC §8): the
// live tier shared by many nodes. It also starts an embedded, in-process
// nats-server (OpenEmbedded) for single-node set-ups.
//
// # Buckets and keys
//
// Six KV buckets, named from Options.Prefix (default "starflow"):
//
//	<prefix>_runs      one entry per run           key T(run_id)
//	<prefix>_steps     one entry per step instance key T(run_id).T(attempt).T(scope_path).T(step_id)
//	<prefix>_events    recent events of a run      key T(run_id)   (a JSON array, newest N by id)
//	<prefix>_progress  latest report per step      key T(run_id).T(scope_path).T(step_id)   (MaxAge ProgressMaxAge)
//	<prefix>_presence  one entry per runner        key T(runner_id)                         (MaxAge PresenceMaxAge)
//	<prefix>_session   session variables           key T(workspace).T(session).T(key)
//
// T(s) is "t" followed by the unpadded base64url encoding of s, so any
// string (dots, spaces, wildcards, the empty string) is one valid subject
// token, and T(run_id) followed by ".>" selects exactly one run's steps or
// progress (DeleteRun purges those subjects from the bucket's stream).
//
// # Versions
//
// PutRun is a compare-and-set on the KV revision: read the entry, give up
// if its Version is greater than or equal to the new one, else Create (no
// entry) or Update (at the revision read); on a revision conflict, read
// again. Any number of writers, in any number of processes, end with the
// highest version.
//
// # Events
//
// A run's recent-events feed is one key holding the JSON array of its
// newest events (sorted by id, at most the keep passed to AppendEvents,
// and within the server's max_payload), updated by the same revision
// compare-and-set as PutRun, merging by event id: a re-applied event adds
// nothing, and ListEvents is one read. Rejected: one key per event (a
// write is one Put, but a read lists the run's keys — a consumer per
// call — and keeping N needs a listing and purges on every append).
//
// # Presence expiry
//
// Servers before 2.11 (the shared server is 2.9.10) have no per-message
// TTL, so each presence value carries its own deadline (now + ttl, by the
// writer's clock) and ListPresence drops entries past it (by the reader's
// clock; the clocks of the nodes are assumed to agree to well under a
// heartbeat). The bucket's MaxAge (PresenceMaxAge) removes the entries of
// runners that stopped publishing; a ttl above it is refused.
//
// # Failures
//
// Every call is bounded by Options.OpTimeout (or the caller's earlier
// deadline). While the connection is down, calls fail at once with an error
// wrapping warm.ErrUnavailable (nothing is buffered); the client reconnects
// forever, every Options.ReconnectWait, so a restarted server is used again
// without a new Store. Buckets are created on first use and again if the
// server lost them.
//
// Import rule: the standard library, package warm, nats.go and (for the
// embedded server) nats-server.
package natskv
