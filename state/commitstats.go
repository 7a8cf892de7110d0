package state

// CommitMetrics is implemented by stores that group-commit their writes
// (the SQL stores, internal/storecore): what their committer did since
// the store was opened. It is optional; the engine exports it as
// starflow_store_commit_batch_writes and
// starflow_store_commit_duration_seconds when the store has it.
type CommitMetrics interface {
	// CommitMetrics returns a snapshot (safe for concurrent use).
	CommitMetrics() CommitStats
}

// CommitStats is one snapshot of a store's group commits.
type CommitStats struct {
	// BatchWrites is the number of writes of each batch committed
	// (or tried: a batch that failed is counted too).
	BatchWrites Histogram
	// CommitSeconds is how long each batch took, from taking its writes
	// off the queue to their outcome (the commit, or each write alone
	// after the batch failed), in seconds.
	CommitSeconds Histogram
}

// Histogram is a cumulative histogram: Cumulative[i] observations were
// at most Bounds[i] (ascending upper bounds); Count observations in all,
// summing to Sum.
type Histogram struct {
	Bounds     []float64
	Cumulative []uint64
	Count      uint64
	Sum        float64
}
