package starflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
)

// TestEnqueueOptionBounds: Enqueue refuses the options the HTTP API's
// schema refuses (ErrInvalid, naming the option and the bound), and
// takes the bounds themselves; the engine's own longer keys (a webhook's)
// are not a caller's and pass.
func TestEnqueueOptionBounds(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{NoRunner: true})
	h.apply("name: w\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	ctx := context.Background()
	for _, c := range []struct {
		opts *starflow.EnqueueOptions
		want string
	}{
		{&starflow.EnqueueOptions{Priority: 99999999999}, "priority 99999999999 is out of range: it must be between -1000000 and 1000000"},
		{&starflow.EnqueueOptions{Priority: -starflow.PriorityMax - 1}, "priority -1000001 is out of range"},
		{&starflow.EnqueueOptions{IdempotencyKey: strings.Repeat("k", 300)}, "the idempotency key is 300 characters long: at most 255"},
		{&starflow.EnqueueOptions{Pool: strings.Repeat("p", 201)}, "the pool name is 201 characters long: at most 200"},
		{&starflow.EnqueueOptions{MaxAttempts: 1001}, "max attempts 1001 is out of range"},
		{&starflow.EnqueueOptions{Delay: -time.Second}, "delay -1s is negative"},
	} {
		_, err := h.eng.Enqueue(ctx, "w", map[string]any{}, c.opts)
		if !errors.Is(err, starflowtype.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalid with %q", *c.opts, err, c.want)
		}
	}
	for _, o := range []*starflow.EnqueueOptions{
		{Priority: starflow.PriorityMax}, {Priority: -starflow.PriorityMax},
		{IdempotencyKey: strings.Repeat("é", starflow.IdempotencyKeyMax)}, {MaxAttempts: starflow.MaxAttemptsMax},
	} {
		if _, err := h.eng.Enqueue(ctx, "w", map[string]any{}, o); err != nil {
			t.Errorf("%+v: %v", *o, err)
		}
	}
}

// TestEnqueueNamesWhatIsMissing: an unknown workflow and a revision a
// known workflow does not have are both ErrNotFound, each saying which.
func TestEnqueueNamesWhatIsMissing(t *testing.T) {
	t.Parallel()
	h := newHarness(t, starflow.Config{NoRunner: true})
	d := h.apply("name: w\nsteps:\n  - id: a\n    context_set: {x: 1}\n")
	ctx := context.Background()
	_, err := h.eng.Enqueue(ctx, "w", map[string]any{}, &starflow.EnqueueOptions{Revision: "deadbeef"})
	if !errors.Is(err, starflowtype.ErrNotFound) || err.Error() != `workflow "w" has no revision "deadbeef" (a revision is the 64 hex digits of a stored definition of it; its current one is `+d.Revision+`)` {
		t.Errorf("unknown revision: %v", err)
	}
	_, err = h.eng.Enqueue(ctx, "nope", map[string]any{}, nil)
	if !errors.Is(err, starflowtype.ErrNotFound) || err.Error() != `workflow "nope" is not applied` {
		t.Errorf("unknown workflow: %v", err)
	}
	if _, err := h.eng.Enqueue(ctx, "w", map[string]any{}, &starflow.EnqueueOptions{Revision: d.Revision}); err != nil {
		t.Errorf("the current revision by name: %v", err)
	}
}
