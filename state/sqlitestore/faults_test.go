package sqlitestore_test

import (
	"testing"

	"github.com/starflow/starflow/state/statetest"
)

// TestFaults: the fault rules act on a real SQLite file, through the
// group committer. Not parallel: the rules are process-wide.
func TestFaults(t *testing.T) { statetest.RunFaults(t, openFresh) }
