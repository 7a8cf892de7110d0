package expr

import (
	"context"
	"strings"
	"sync"
	"testing"
)

// TestWith: a derived environment declares the extra names, binds them at
// evaluation, is cached, and leaves the root environment unchanged.
func TestWith(t *testing.T) {
	root, err := NewEnv(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Compile("order.id"); err == nil || !strings.Contains(err.Error(), "undeclared reference to 'order'") {
		t.Fatalf("root env compiled an undeclared name: %v", err)
	}
	d, err := root.With("order")
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := root.With("order"); again != d {
		t.Fatal("With is not cached")
	}
	if same, _ := d.With("order", "item"); same != d {
		t.Fatal("With of declared names did not return the same Env")
	}
	if _, err := d.ParseTemplate("${{ order.id + '/' + string(item) }}"); err != nil {
		t.Fatal(err)
	}
	// line is not declared by d: compile fails; d2 declares both.
	d2, err := d.With("line")
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := root.With("line", "order"); d3 != d2 {
		t.Fatal("the same set of names gave two environments")
	}
	if _, err := d.ParseTemplate("${{ line }}"); err == nil {
		t.Fatal("d compiled a name only d2 declares")
	}
	tpl2, err := d2.ParseTemplate("${{ order.id + '/' + string(item) + '/' + string(line == null) }}")
	if err != nil {
		t.Fatal(err)
	}
	v, err := d2.EvalTemplate(context.Background(), tpl2, map[string]any{"order": map[string]any{"id": "o-1"}, "item": int64(3)})
	if err != nil || v != "o-1/3/true" {
		t.Fatalf("eval: %v %v", v, err)
	}
	if _, err := root.Compile("order"); err == nil {
		t.Fatal("With changed the root environment")
	}
}

// TestWithConcurrently: deriving and compiling from several goroutines is
// safe (run with -race).
func TestWithConcurrently(t *testing.T) {
	root, err := NewEnv(Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"a", "b"}[i%2]
			d, err := root.With(name)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := d.Compile(name + " + 1"); err != nil {
				t.Error(err)
			}
			if _, err := root.Compile("nosuch(1)"); err == nil {
				t.Error("compiled an unknown function")
			}
		}()
	}
	wg.Wait()
}
