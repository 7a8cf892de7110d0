package statetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// RunFaults checks that the store core's fault points (internal/faultpoint)
// act on a real adapter: a fail rule on a named query, a write operation
// or the commit makes the write return the injected error and commit
// nothing, and a delay rule delays it. The rules are process-wide, so its
// cases run one after another and the caller must not run it in parallel
// with other tests of the package that write.
func RunFaults(t *testing.T, open Opener) {
	t.Helper()
	a := open(t, nil)
	ctx := t.Context()
	put := func(name string) error {
		_, err := a.PutDefinition(ctx, &state.PutDefinitionParams{
			Name: name, Revision: "rev-" + name, Spec: json.RawMessage(`{"name":"` + name + `","steps":[]}`), Source: "name: " + name + "\n",
		})
		return err
	}
	install := func(t *testing.T, spec string) {
		t.Helper()
		r, err := faultpoint.Parse(spec)
		if err != nil {
			t.Fatalf("Parse(%q): %v", spec, err)
		}
		t.Cleanup(faultpoint.Set(r))
	}
	for _, tc := range []struct{ name, spec, point string }{
		{"Query", "query:insert_definition=fail", "query:insert_definition"},
		{"Op", "op:PutDefinition=fail", "op:PutDefinition"},
		{"Begin", "begin=fail", "begin"},
		{"Commit", "commit=fail", "commit"},
	} {
		t.Run("Fail"+tc.name, func(t *testing.T) {
			wf := "faults-" + tc.name
			install(t, tc.spec)
			err := put(wf)
			if !errors.Is(err, faultpoint.ErrInjected) {
				t.Fatalf("PutDefinition under %q = %v, want an error wrapping faultpoint.ErrInjected", tc.spec, err)
			}
			want := "faultpoint: injected failure at " + tc.point
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			faultpoint.Clear()
			_, err = a.GetDefinition(ctx, &state.GetDefinitionParams{Name: wf})
			if !errors.Is(err, starflowtype.ErrNotFound) {
				t.Fatalf("GetDefinition(%s) after the injected failure = %v, want ErrNotFound (nothing committed)", wf, err)
			}
			if err := put(wf); err != nil {
				t.Fatalf("PutDefinition with the rules cleared: %v", err)
			}
		})
	}
	t.Run("FailReadSurfacesFromScan", func(t *testing.T) {
		if err := put("faults-read"); err != nil {
			t.Fatal(err)
		}
		install(t, "query:get_definition_*=fail")
		_, err := a.GetDefinition(ctx, &state.GetDefinitionParams{Name: "faults-read"})
		if !errors.Is(err, faultpoint.ErrInjected) {
			t.Fatalf("GetDefinition = %v, want the injected failure", err)
		}
	})
	t.Run("Delay", func(t *testing.T) {
		const d = 150 * time.Millisecond
		install(t, "op:PutDefinition=delay:150ms")
		start := time.Now()
		if err := put("faults-delay"); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took < d {
			t.Errorf("PutDefinition took %v under a %v delay", took, d)
		}
		dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		faultpoint.Set(mustParse(t, "op:PutDefinition=hang"))
		_, err := a.PutDefinition(dctx, &state.PutDefinitionParams{Name: "faults-hang", Revision: "r", Spec: json.RawMessage(`{}`)})
		if !errors.Is(err, faultpoint.ErrInjected) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("PutDefinition under a hang with a 20ms deadline = %v, want injected + deadline exceeded", err)
		}
	})
}

func mustParse(t *testing.T, spec string) *faultpoint.Rules {
	t.Helper()
	r, err := faultpoint.Parse(spec)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return r
}
