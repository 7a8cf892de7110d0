package engine

import (
	"fmt"
	"unicode/utf8"

	"github.com/starflow/starflow/starflowtype"
)

// Bounds on what a parent stores of its child's failure (decision 262).
//
// A workflow_call whose child failed fails with type child_failed, its
// cause the child's own error object, and its message quoting the child's
// error text. Down a chain of child runs each parent would hold every
// error below it again — the causes nest one level deeper per run and
// each level's message quotes all the messages below it — so a run's
// error_json grew with the square of its depth below the failure
// (~10 MB a run at depth 476). Both are cut where the child_failed is
// made:
//
//   - a child's error text is quoted up to maxChildMessage bytes: its
//     first and last halves (the nearest calls and the innermost failure),
//     the middle replaced by a note of how many bytes were left out;
//   - an error object nests at most maxCauses causes: the maxCauses-1
//     nearest ones are kept, then the innermost failure — the one that
//     started the chain, with all its fields (type, message, step_id,
//     scope_path, status, body, details) — and the last child_failed kept
//     records how many causes were left out between it and the innermost
//     as details.causes_omitted.
//
// So a run's error_json is bounded whatever the depth of the tree: at
// most maxCauses+1 objects, each child_failed message a little over
// maxChildMessage bytes, and the innermost failure as it was stored.
const (
	maxCauses       = 8
	maxChildMessage = 2048
)

// causesOmitted is the details key of a child_failed whose chain of causes
// was cut below it.
const causesOmitted = "causes_omitted"

// elide returns s when it is at most max bytes, else its first and last
// max/2 bytes (cut at rune boundaries) with a note between them saying
// how many bytes were left out.
func elide(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := max/2, len(s)-max/2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s … (%d bytes left out) … %s", s[:head], tail-head, s[tail:])
}

// capCauses cuts the chain of causes below info to at most maxCauses (see
// above), in place, and elides the messages of the child_failed objects in
// it (a child's error stored before they were bounded). info's own message
// is left as it is.
func capCauses(info *starflowtype.ErrorInfo) {
	var chain []*starflowtype.ErrorInfo
	for c := info.Cause; c != nil; c = c.Cause {
		chain = append(chain, c)
	}
	for _, c := range chain {
		if c.Type == starflowtype.ErrorChildFailed {
			c.Message = elide(c.Message, maxChildMessage)
		}
	}
	if len(chain) <= maxCauses {
		return
	}
	innermost := chain[len(chain)-1]
	last := chain[maxCauses-2] // the last one kept above the innermost
	omitted := omittedBelow(last)
	for _, c := range chain[maxCauses-1 : len(chain)-1] {
		omitted += 1 + omittedBelow(c)
	}
	details, _ := last.Details.(map[string]any)
	if details == nil {
		details = map[string]any{}
	}
	details[causesOmitted] = int64(omitted)
	last.Details, last.Cause = details, innermost
}

// omittedBelow is how many causes were already left out below c (its
// details.causes_omitted; 0 when none).
func omittedBelow(c *starflowtype.ErrorInfo) int {
	details, _ := c.Details.(map[string]any)
	switch n := details[causesOmitted].(type) {
	case int64:
		return int(n)
	case float64:
		return int(n)
	}
	return 0
}
