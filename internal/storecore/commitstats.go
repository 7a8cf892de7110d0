package storecore

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/starflow/starflow/state"
)

// Bounds of the committer's histograms (state.CommitMetrics).
var (
	// commitBatchBounds are upper bounds of the writes per batch, up to
	// MaxBatchDefault.
	commitBatchBounds = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
	// commitSecondsBounds are upper bounds of a batch's duration: 0.5 ms
	// (SQLite without fsync) to 2.5 s (a stalled disk or server).
	commitSecondsBounds = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}
)

// histogram counts observations in fixed buckets with atomics: cheap
// enough for every batch, and read without stopping the committer.
type histogram struct {
	bounds  []float64
	buckets []atomic.Uint64 // per bucket (not cumulative); the last one is +Inf
	count   atomic.Uint64
	sumBits atomic.Uint64 // float64 bits of the sum
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, buckets: make([]atomic.Uint64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	for {
		old := h.sumBits.Load()
		if h.sumBits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			break
		}
	}
	h.count.Add(1)
}

// snapshot is the histogram as state.Histogram. Observations racing the
// read may be counted in Count but not yet in a bucket, or the reverse;
// Count is made the +Inf bucket's total so the two agree.
func (h *histogram) snapshot() state.Histogram {
	out := state.Histogram{Bounds: h.bounds, Cumulative: make([]uint64, len(h.bounds)), Sum: math.Float64frombits(h.sumBits.Load())}
	var cum uint64
	for i := range h.bounds {
		cum += h.buckets[i].Load()
		out.Cumulative[i] = cum
	}
	out.Count = cum + h.buckets[len(h.bounds)].Load()
	return out
}

// commitStats are the committer's histograms.
type commitStats struct {
	batch, seconds *histogram
}

func newCommitStats() commitStats {
	return commitStats{batch: newHistogram(commitBatchBounds), seconds: newHistogram(commitSecondsBounds)}
}

// observe records one batch of n writes that began at began.
func (c *committer) observe(n int, began time.Time) {
	c.stats.batch.observe(float64(n))
	c.stats.seconds.observe(time.Since(began).Seconds())
}

// CommitMetrics implements state.CommitMetrics: empty histograms when the
// store needs no group commit.
func (s *Store) CommitMetrics() state.CommitStats {
	if s.commit == nil {
		st := newCommitStats()
		return state.CommitStats{BatchWrites: st.batch.snapshot(), CommitSeconds: st.seconds.snapshot()}
	}
	return state.CommitStats{BatchWrites: s.commit.stats.batch.snapshot(), CommitSeconds: s.commit.stats.seconds.snapshot()}
}
