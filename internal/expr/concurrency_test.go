package expr

import (
	"sync"
	"testing"
)

// TestCompileConcurrently: compiling on one Env from several goroutines is
// safe (run with -race: cel-go's checker alone races when one goroutine
// reports an undeclared name while another checks a comprehension).
func TestCompileConcurrently(t *testing.T) {
	for range 30 {
		e, err := NewEnv(Limits{})
		if err != nil {
			t.Fatal(err)
		}
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, src := range []string{"nosuch(1)", "[1, 2].map(x, [x].map(y, y * 2))", "nosuch2(2)", "[3].exists(z, z > 1)"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, _ = e.Compile(src)
			}()
		}
		close(start)
		wg.Wait()
	}
}
