package pgstore

import "time"

// The drain and stats statements of outbox.go, for the plan tests.
const OutboxCandidatesSQL = outboxCandidatesSQL

func OutboxStatsQuery(bounds []time.Duration) (string, []any) { return outboxStatsQuery(bounds) }
