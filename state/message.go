package state

import (
	"regexp"
	"strings"
)

// storeOpPrefix is what a store adapter puts before the errors of an
// operation: its package name and the operation ("sqlitestore: cancel: ",
// "pgstore: heartbeat job: "), wherever it sits in a wrapped error's text.
var storeOpPrefix = regexp.MustCompile(`\b(?:sqlitestore|pgstore|nullstore): (?:[a-z]+(?: [a-z]+)*: )?`)

// Message is err's text for the people an API answer or a command's output
// is for: on one line, without the store adapters' "sqlitestore: op: "
// prefixes (an adapter's errors keep them, for logs and for Go callers),
// and without the trailing ": " + sentinel.Error() when sentinel is not nil
// (": conflict", ": lease lost", ": no_checkpoint": the answer's status or
// code already says it). Message(nil, …) is "".
func Message(err, sentinel error) string {
	if err == nil {
		return ""
	}
	s := strings.Join(strings.Fields(err.Error()), " ")
	s = storeOpPrefix.ReplaceAllString(s, "")
	if sentinel != nil {
		s = strings.TrimSuffix(s, ": "+sentinel.Error())
	}
	return s
}
