package expr

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"
)

// guardVars holds values large enough that one call of a guarded
// function on them would run for tens of seconds (measured before the
// guards: 35 s to 90 s each).
func guardVars() map[string]any {
	const n = 50_000
	big, other := make([]any, n), make([]any, n)
	for i := range big {
		big[i] = int64(i)
		other[i] = int64(-i - 1)
	}
	nested := make([]any, 1000) // 1,000 lists of 1,000 ints: comparing two costs up to 1,000
	for i := range nested {
		l := make([]any, 1000)
		for j := range l {
			l[j] = int64(j)
		}
		l[999] = int64(i)
		nested[i] = l
	}
	words := make([]any, n)
	for i := range words {
		words[i] = "w"
	}
	return map[string]any{"input": map[string]any{
		"big": big, "other": other, "nested": nested, "words": words,
		"a100k":  strings.Repeat("a", 100_000),
		"needle": strings.Repeat("a", 50_000) + "b",
		"sep":    strings.Repeat("-", 100_000),
	}}
}

// TestGuardsStopHugeCalls: a call whose cost alone exceeds the limit fails
// at once with the cost-limit error instead of running to its end.
func TestGuardsStopHugeCalls(t *testing.T) {
	t.Parallel()
	// The default cost limit, but a time limit no loaded machine reaches
	// first: the refusal must come from the guard, not the clock.
	e, err := NewEnv(Limits{Cost: CostDefault, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	vars := guardVars()
	for _, src := range []string{
		"sets.contains(input.big, input.big)",
		"sets.equivalent(input.big, input.big)",
		"sets.intersects(input.big, input.other)",
		"sets.contains(input.nested, input.nested)",
		"input.big.hasAll(input.big)",
		"input.big.hasOnly(input.big)",
		"input.big.hasAny(input.other)",
		"input.big.hasExactly(input.big)",
		"input.big.distinct()",
		"input.nested.distinct()",
		"input.a100k.indexOf(input.needle)",
		"input.a100k.indexOf(input.needle, 1)",
		"input.a100k.lastIndexOf(input.needle)",
		"input.a100k.lastIndexOf(input.needle, 99999)",
		"input.a100k.replace('a', input.sep)",
		"input.a100k.replace('a', input.sep, 50000)",
		"input.words.join(input.sep)",
		// Before the guards, the tracker's error ended an evaluation only
		// after the call; an || must not hide the refusal either.
		"sets.contains(input.big, input.big) || true",
	} {
		t.Run(src, func(t *testing.T) {
			t.Parallel()
			p, err := e.Compile(src)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = e.Eval(context.Background(), p, vars)
			took := time.Since(start)
			if err == nil || !strings.Contains(err.Error(), "exceeded its cost limit of 1000000") {
				t.Fatalf("want the cost-limit error, got %v", err)
			}
			// The unguarded call takes 2 s to 90 s; the refusal a few
			// milliseconds (more under -race on a loaded machine).
			if took > 2*time.Second {
				t.Errorf("the refusal took %s", took)
			}
		})
	}
}

// TestGuardsAllowCallsWithinTheLimit: the guards refuse only what the
// limit forbids; a call just under it runs as before, with its own result.
func TestGuardsAllowCallsWithinTheLimit(t *testing.T) {
	t.Parallel()
	e := Default()
	l900 := make([]any, 900) // 900 × 900 = 810,000 comparisons
	for i := range l900 {
		l900[i] = int64(i)
	}
	vars := map[string]any{"input": map[string]any{"l": l900, "s": strings.Repeat("ab", 5000)}}
	for _, c := range []struct {
		src  string
		want any
	}{
		{"sets.contains(input.l, input.l)", true},
		{"sets.equivalent(input.l.slice(0, 600), input.l.slice(0, 600).reverse())", true},
		{"input.l.hasAll(input.l.reverse())", true},
		{"size(input.l.slice(0, 600).distinct())", int64(600)},
		{"input.s.indexOf('abababababc')", int64(-1)},
		{"size(input.s.replace('a', 'xyz'))", int64(20000)},
		{"size(['a', 'b', 'c'].join(input.s))", int64(20003)},
	} {
		p, err := e.Compile(c.src)
		if err != nil {
			t.Fatalf("%s: %v", c.src, err)
		}
		got, err := e.Eval(context.Background(), p, vars)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s = %v, %v; want %v", c.src, got, err, c.want)
		}
	}
}

// TestGuardsFollowTheLimit: the guards price calls against the
// environment's own limit, and name the call that was refused.
func TestGuardsFollowTheLimit(t *testing.T) {
	t.Parallel()
	e, err := NewEnv(Limits{Cost: 1000})
	if err != nil {
		t.Fatal(err)
	}
	l := make([]any, 40)
	for i := range l {
		l[i] = int64(i)
	}
	p, err := e.Compile("input.l.map(x, 'x').join(input.sep)")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{"input": map[string]any{"l": l, "sep": strings.Repeat("-", 100)}}
	if _, err := e.Eval(context.Background(), p, vars); err == nil ||
		err.Error() != "expression exceeded its cost limit of 1000 (join would cost at least 3946)" {
		// 40 one-letter words and 39 separators of 100: a result of 3,940
		// characters, plus the scan of the list (5) and the call (1).
		t.Fatalf("want the guard's cost-limit error, got %v", err)
	}
	p, err = e.Compile("sets.contains(input.l, input.l)") // 40 × 40 = 1,600 > 1,000
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Eval(context.Background(), p, vars); err == nil || !strings.Contains(err.Error(), "exceeded its cost limit of 1000") {
		t.Fatalf("want the cost-limit error, got %v", err)
	}
}
