package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/starflow/starflow/starflowtype"
)

func TestElide(t *testing.T) {
	t.Parallel()
	if got := elide("short", 10); got != "short" {
		t.Errorf("elide of a short text = %q", got)
	}
	s := strings.Repeat("a", 600) + strings.Repeat("é", 500) + "THE END"
	got := elide(s, 1000)
	if !utf8.ValidString(got) {
		t.Errorf("elide cut a rune: %q", got)
	}
	if !strings.HasPrefix(got, strings.Repeat("a", 500)) || !strings.HasSuffix(got, "THE END") || !strings.Contains(got, "bytes left out") {
		t.Errorf("elide keeps neither end: %q", got)
	}
	if len(got) > 1000+40 {
		t.Errorf("elided to %d bytes, want about 1000", len(got))
	}
}

// TestCapCausesAlongAChain: wrapping a failure in child_failed objects
// one level at a time, as each parent up a chain of runs does, keeps at
// most maxCauses causes, the innermost failure whole, and a count of the
// causes left out that adds up across the levels.
func TestCapCausesAlongAChain(t *testing.T) {
	t.Parallel()
	scope := ""
	bottom := &starflowtype.ErrorInfo{Type: "Bottom", Message: "bottom reached", StepID: "boom", ScopePath: &scope,
		Details: map[string]any{"n": int64(7)}}
	info := bottom
	const levels = 50
	for i := 1; i <= levels; i++ {
		// Through JSON, as a child's error reaches its parent.
		b, err := json.Marshal(infoMap(info))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		next := &starflowtype.ErrorInfo{Type: starflowtype.ErrorChildFailed, Message: strings.Repeat("m", 3000), Cause: mapInfo(m)}
		capCauses(next)
		info = next

		var chain []*starflowtype.ErrorInfo
		for c := info.Cause; c != nil; c = c.Cause {
			chain = append(chain, c)
		}
		if want := min(i, maxCauses); len(chain) != want {
			t.Fatalf("level %d: %d causes, want %d", i, len(chain), want)
		}
		inner := chain[len(chain)-1]
		if inner.Type != "Bottom" || inner.Message != "bottom reached" || inner.StepID != "boom" || omittedBelow(inner) != 0 {
			t.Fatalf("level %d: innermost %+v", i, inner)
		}
		if d, _ := inner.Details.(map[string]any); d["n"] != float64(7) {
			t.Fatalf("level %d: innermost details %v", i, inner.Details)
		}
		omitted := 0
		for _, c := range chain[:len(chain)-1] {
			if c.Type != starflowtype.ErrorChildFailed || len(c.Message) > maxChildMessage+40 {
				t.Fatalf("level %d: cause %s with a message of %d bytes", i, c.Type, len(c.Message))
			}
			omitted += omittedBelow(c)
		}
		if want := max(i-maxCauses, 0); omitted != want {
			t.Fatalf("level %d: %d causes reported left out, want %d", i, omitted, want)
		}
	}
	b, _ := json.Marshal(infoMap(info))
	if len(b) > (maxCauses+1)*(maxChildMessage+200)+3000 {
		t.Errorf("error object %d bytes after %d levels", len(b), levels)
	}
}
