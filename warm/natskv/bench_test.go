package natskv_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/natskv"
)

// BenchmarkPutRun: one writer, rising versions of one run (a Get and an
// Update per call) on the embedded server.
func BenchmarkPutRun(b *testing.B) {
	s, err := natskv.OpenEmbedded(context.Background(), natskv.EmbeddedOptions{Dir: b.TempDir()}, natskv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	e := &warm.RunEntry{RunID: "r", Status: "running"}
	b.ResetTimer()
	for i := range b.N {
		e.Version = int64(i + 1)
		if _, err := s.PutRun(ctx, e, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPutRunParallel: many writers, each on its own run.
func BenchmarkPutRunParallel(b *testing.B) {
	s, err := natskv.OpenEmbedded(context.Background(), natskv.EmbeddedOptions{Dir: b.TempDir()}, natskv.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		e := &warm.RunEntry{RunID: fmt.Sprintf("r%d", n.Add(1))}
		for pb.Next() {
			e.Version++
			if _, err := s.PutRun(ctx, e, false); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
