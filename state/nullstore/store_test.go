package nullstore_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/state/nullstore"
	"github.com/starflow/starflow/state/statetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	statetest.Run(t, func(t *testing.T) state.Adapter {
		s := nullstore.New()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
