package natskv_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that closed stores and stopped embedded servers leave no
// goroutines behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
