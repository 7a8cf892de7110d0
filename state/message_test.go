package state_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

func TestMessage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err      error
		sentinel error
		want     string
	}{
		{fmt.Errorf("sqlitestore: cancel: %w", fmt.Errorf("run r1 already ended cancelled: %w", starflowtype.ErrConflict)),
			starflowtype.ErrConflict, "run r1 already ended cancelled"},
		{fmt.Errorf("pgstore: heartbeat job: %w", fmt.Errorf("job j1: the lease expired at T: %w", starflowtype.ErrLeaseLost)),
			starflowtype.ErrLeaseLost, "job j1: the lease expired at T"},
		// In the middle of a wrapped error, and a sentinel kept when not named.
		{fmt.Errorf("run r1: %w", fmt.Errorf("sqlitestore: requeue: %w", starflowtype.ErrNotFound)), nil, "run r1: not found"},
		{fmt.Errorf("sqlitestore: %w", errors.New("bad\n  thing")), nil, "bad thing"},
		// Text that only looks like a prefix elsewhere stays.
		{errors.New(`workflow "sqlitestore-demo": not applied`), nil, `workflow "sqlitestore-demo": not applied`},
		{nil, nil, ""},
	}
	for _, c := range cases {
		if got := state.Message(c.err, c.sentinel); got != c.want {
			t.Errorf("Message(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
