package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
)

// exitUsage is the exit status of a command line refused before anything
// is read or written: an unknown flag, a flag value that does not parse, a
// value outside an enum flag's values (decision 98). It is the status of a
// --payload that is not JSON too (exitBadPayload).
const exitUsage = 2

// usageError refuses the command line with exit status exitUsage.
func usageError(format string, a ...any) error {
	return &exitError{code: exitUsage, msg: fmt.Sprintf(format, a...)}
}

// The values of the CLI's enum flags.
var (
	// runStatusValues: runs list --status.
	runStatusValues = func() []string {
		var out []string
		for _, s := range starflowtype.RunStatuses() {
			out = append(out, string(s))
		}
		return out
	}()
	// recoveryModeValues: run and enqueue --recovery-mode.
	recoveryModeValues = []string{string(starflowtype.RecoveryReplay), string(starflowtype.RecoveryResume), string(starflowtype.RecoveryManual)}
	// resumeModeValues: runs resume --mode.
	resumeModeValues = []string{string(starflowtype.RecoveryResume), string(starflowtype.RecoveryReplay)}
	// revisionValues: runs resume --revision.
	revisionValues = []string{starflow.RevisionPinned, starflow.RevisionCurrent}
)

// checkEnum refuses the value of --flag (exit exitUsage) unless it is one
// of valid; the message names the flag, the value and every valid value.
// An empty value is allowed when the flag's default is empty (optional).
func checkEnum(flag, value string, valid []string, optional bool) error {
	if (optional && value == "") || slices.Contains(valid, value) {
		return nil
	}
	return usageError("--%s %q is not a valid value: use one of %s", flag, value, strings.Join(valid, ", "))
}
