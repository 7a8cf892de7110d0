package expr

import (
	"context"
	"errors"
	"testing"
)

// TestEvalCancelledIsNotTheExpressionsFailure: an evaluation whose
// context is cancelled reports the cancellation's cause, not its own time
// limit.
func TestEvalCancelledIsNotTheExpressionsFailure(t *testing.T) {
	e := Default()
	p, err := e.Compile("lists.range(20000).map(x, x * 2).size()") // long enough to check for interrupts
	if err != nil {
		t.Fatal(err)
	}
	cause := errors.New("the race was lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	_, err = e.Eval(ctx, p, nil)
	var c *CancelledError
	if !errors.As(err, &c) || !errors.Is(err, cause) {
		t.Fatalf("error %v, want a CancelledError with the cause", err)
	}
}

// TestRecord: listed fields read as null when absent, the value holds
// only the fields present, a cause reads as a record, other maps as data.
func TestRecord(t *testing.T) {
	e := Default()
	r := NewRecord(map[string]any{"type": "http", "body": map[string]any{"a": int64(1)},
		"cause": map[string]any{"type": "fail"}}, "type", "status", "body", "cause", "details")
	for src, want := range map[string]any{
		"error.status == null":                true,
		"error.cause.details == null":         true,
		"has(error.body.status)":              false,
		"size(error)":                         int64(3),
		"'status' in error":                   false,
		"error.body.a":                        int64(1),
		"error.type + ':' + error.cause.type": "http:fail",
	} {
		p, err := e.Compile(src)
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		got, err := e.Eval(context.Background(), p, map[string]any{"error": r})
		if err != nil || got != want {
			t.Errorf("%s = %v (%v), want %v", src, got, err, want)
		}
	}
	p, _ := e.Compile("error")
	got, err := e.Eval(context.Background(), p, map[string]any{"error": r})
	m, _ := got.(map[string]any)
	if err != nil || len(m) != 3 || m["cause"].(map[string]any)["type"] != "fail" {
		t.Fatalf("error as a value: %v (%v)", got, err)
	}
}
