package pgstore_test

import (
	"context"
	"strings"
	"testing"

	"github.com/starflow/starflow/state/pgstore"
)

// TestCheckSchema: a schema name is a lower-case unquoted identifier of at
// most 63 bytes, not a system name; Open refuses another before it
// connects (issue 10 item 6).
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"starflow", "_x", "sf_test_0a1b2c", strings.Repeat("a", 63)} {
		if err := pgstore.CheckSchema(ok); err != nil {
			t.Errorf("CheckSchema(%q): %v", ok, err)
		}
	}
	for bad, frag := range map[string]string{
		"":                       "empty",
		"a;drop":                 "lower-case letters, digits and underscores",
		"a b":                    "lower-case letters",
		`a"b`:                    "lower-case letters",
		"Starflow":               "lower-case letters",
		"1abc":                   "not starting with a digit",
		"café":                   "lower-case letters",
		"a\x00b":                 "lower-case letters",
		"pg_catalog":             "reserved",
		strings.Repeat("a", 64):  "at most 63",
		"public.workflow_runs":   "lower-case letters",
		"starflow,public":        "lower-case letters",
		"$user":                  "lower-case letters",
		"x-y":                    "lower-case letters",
		"schema_name_with_tab\t": "lower-case letters",
	} {
		err := pgstore.CheckSchema(bad)
		if err == nil || !strings.Contains(err.Error(), frag) {
			t.Errorf("CheckSchema(%q) = %v, want an error saying %q", bad, err, frag)
			continue
		}
		if bad == "" {
			continue // Config.Schema "" is the connection's own search_path
		}
		// Open refuses it before dialling anything.
		if _, err := pgstore.Open(context.Background(), pgstore.Config{URL: "postgres://u@192.0.2.1:1/db?connect_timeout=30", Schema: bad}); err == nil ||
			!strings.Contains(err.Error(), "pgstore: Schema") {
			t.Errorf("Open with schema %q: %v", bad, err)
		}
	}
}
