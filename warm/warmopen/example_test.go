package warmopen_test

import (
	"context"
	"fmt"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/warmopen"
)

// A late write (an older cold version) never replaces newer data; the
// sweep's forced write does.
func ExampleOpen() {
	ctx := context.Background()
	s, err := warmopen.Open(ctx, "memory", warmopen.Options{})
	if err != nil {
		panic(err)
	}
	defer s.Close()
	wrote, _ := s.PutRun(ctx, &warm.RunEntry{RunID: "r1", Status: "running", Version: 2}, false)
	fmt.Println("v2 written:", wrote)
	wrote, _ = s.PutRun(ctx, &warm.RunEntry{RunID: "r1", Status: "queued", Version: 1}, false)
	fmt.Println("late v1 written:", wrote)
	e, _ := s.GetRun(ctx, "r1")
	fmt.Println(e.Status, e.Version)
	// Output:
	// v2 written: true
	// late v1 written: false
	// running 2
}
