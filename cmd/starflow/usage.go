package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
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

// checkCommandLine is the root's PersistentPreRunE: what every command
// line must satisfy before a command runs — one store named, and each
// numeric flag within its range (checkFlagRanges).
func checkCommandLine(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	if f.Changed("db") && f.Changed("store") {
		db, _ := f.GetString("db")
		store, _ := f.GetString("store")
		return usageError("--db %s and --store %s both name the store: give one (--db PATH is short for --store sqlite://PATH)", db, redactURL(store))
	}
	if !f.Changed("db") && !f.Changed("store") && os.Getenv(envStore) != "" && os.Getenv(envDB) != "" {
		return usageError("%s and %s are both set and name the store: unset one, or give --store or --db (a flag replaces them)", envStore, envDB)
	}
	if err := checkServerLine(cmd); err != nil {
		return err
	}
	if err := checkLogFlags(f); err != nil {
		return err
	}
	return checkFlagRanges(cmd)
}

// annotationRemote marks a command that acts through a server's HTTP API
// when --server (or STARFLOW_SERVER) names one (a cobra annotation).
const annotationRemote = "starflow.remote"

// remoteCommand marks cmd as able to act through a server.
func remoteCommand(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationRemote] = "true"
	return cmd
}

// remoteCapable reports whether cmd acts through a server when given one.
func remoteCapable(cmd *cobra.Command) bool { return cmd.Annotations[annotationRemote] == "true" }

// checkServerLine refuses (exit exitUsage) --server on a command that
// works on a store only, --server beside --db or --store, and
// STARFLOW_SERVER beside STARFLOW_STORE or STARFLOW_DB when no flag says
// which one a command that accepts both should use. STARFLOW_SERVER alone
// is ignored by the store-only commands (dev, server, worker, run, …), so
// it can stay exported in a shell that also runs them.
func checkServerLine(cmd *cobra.Command) error {
	f := cmd.Flags()
	if !f.Changed("server") {
		if remoteCapable(cmd) && !f.Changed("db") && !f.Changed("store") && os.Getenv(envServer) != "" {
			for _, env := range []string{envStore, envDB} {
				if os.Getenv(env) != "" {
					return usageError("%s and %s are both set: %s could act on the server or on the store; unset one, or give --server or --db/--store (a flag replaces them)",
						envServer, env, cmd.CommandPath())
				}
			}
		}
		return nil
	}
	server, _ := f.GetString("server")
	switch {
	case cmd.Name() == "help" || cmd.Name() == "completion" || cmd.Parent() != nil && cmd.Parent().Name() == "completion":
		return nil // prints text only
	case cmd.Name() == "live" && cmd.Parent() != nil && cmd.Parent().Name() == "runs":
		return usageError("%s reads the warm tier, never a server: drop --server (the server itself answers GET %s/live/runs/ID)", cmd.CommandPath(), strings.TrimRight(server, "/"))
	case !remoteCapable(cmd):
		return usageError("%s works on a store only, not through a server: drop --server (it is for enqueue, apply, validate, plan, runs list|show|ledger|events|waits|resume|retrigger|cancel, signal, wake, schedules, webhooks and keys)", cmd.CommandPath())
	case f.Changed("db") || f.Changed("store"):
		return usageError("--server and --%s both name where %s acts: give one", map[bool]string{true: "db", false: "store"}[f.Changed("db")], cmd.CommandPath())
	}
	return nil
}

// flagRange is the valid range of a numeric flag: values of min or more
// (more than min when exclusive), in the flag's unit (nanoseconds for a
// duration). note says what the boundary means, for the refusal.
type flagRange struct {
	min       float64
	exclusive bool
	any       bool // every value is valid
	// max, with hasMax, is the largest valid value.
	max    float64
	hasMax bool
	note   string
}

var (
	positive    = flagRange{min: 0, exclusive: true}
	nonNegative = flagRange{min: 0}
	atLeastOne  = flagRange{min: 1}
	anyValue    = flagRange{any: true}
)

// flagRanges holds the range of every numeric flag of the CLI, by flag
// name (a name means the same on every command that has it). A numeric
// flag missing here is a defect TestEveryNumericFlagHasARange reports.
var flagRanges = map[string]flagRange{
	// Runners (run, worker, dev).
	"lease-ttl":     positive,
	"heartbeat":     positive,
	"poll-interval": positive,
	"grace":         {min: 0, note: "0s releases the leases of runs in flight at once"},
	"concurrency":   atLeastOne,
	"step-timeout":  {min: 0, note: "0s is the default, 30s"},
	// Maintenance (worker, server, dev).
	"leader-ttl":          {min: float64(state.LeaderTTLMin)},
	"sweep-interval":      positive,
	"timer-interval":      positive,
	"session-gc-interval": positive,
	"retention-interval":  {min: 0, note: "0s turns the retention pass off"},
	"gc-batch":            atLeastOne,
	"gc-throttle":         {min: 0, note: "0 leaves no pause between batches"},
	// Warm tier.
	"warm-health-warn":     positive,
	"warm-health-critical": positive,
	"warm-sweep-interval":  positive,
	"presence-interval":    positive,
	"drain-poll":           {min: 0, note: "0s is the default, 200ms"},
	"outbox-retention":     {min: 0, note: "0s is the default, 1h"},
	// Listener.
	"wake-rate":  {min: 0, note: "0 turns the limit off"},
	"wake-burst": atLeastOne,
	// The HTTP API (server, dev).
	"api-rate":  {min: 0, note: "0 turns the limit off"},
	"api-burst": atLeastOne,
	// enqueue.
	"delay":    {min: 0, note: "0s makes the run available at once"},
	"priority": {min: -starflow.PriorityMax, max: starflow.PriorityMax, hasMax: true, note: "higher is claimed first"},
	// runs list, ledger, events, waits.
	"limit":   atLeastOne,
	"attempt": {min: 0, note: "0 shows every attempt"},
	"after":   {min: 0, note: "0 shows every event"},
	// schedules list (its upper bound, starflow.ScheduleNextMax, is the
	// command's own check).
	"next": atLeastOne,
	// The caps of workflow.Limits: 0 is the default, a negative value
	// lifts the cap.
	workflow.LimitSourceBytes.Flag[2:]:        anyValue,
	workflow.LimitInputBytes.Flag[2:]:         anyValue,
	workflow.LimitPayloadBytes.Flag[2:]:       anyValue,
	workflow.LimitForEachItems.Flag[2:]:       anyValue,
	workflow.LimitForEachConcurrency.Flag[2:]: anyValue,
	workflow.LimitMaxIterations.Flag[2:]:      anyValue,
	workflow.LimitNestingDepth.Flag[2:]:       anyValue,
	workflow.LimitForEachInFlight.Flag[2:]:    anyValue,
	workflow.LimitChildDepth.Flag[2:]:         anyValue,
}

// checkFlagRanges refuses (exit exitUsage) a numeric flag of cmd whose
// value is outside its flagRanges entry, naming the flag, the value and
// the valid range.
func checkFlagRanges(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(fl *pflag.Flag) {
		if err != nil {
			return
		}
		v, ok := numericValue(cmd.Flags(), fl)
		if !ok {
			return
		}
		r, known := flagRanges[fl.Name]
		if r.any || !known || (v > r.min || v == r.min && !r.exclusive) && (!r.hasMax || v <= r.max) {
			return // NaN fails every comparison and is refused
		}
		format := func(x float64) string {
			if fl.Value.Type() == "duration" {
				return time.Duration(x).String()
			}
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		want := format(r.min) + " or more"
		switch {
		case r.hasMax:
			want = "between " + format(r.min) + " and " + format(r.max)
		case r.exclusive:
			want = "more than " + format(r.min)
		}
		if r.note != "" {
			want += " (" + r.note + ")"
		}
		err = usageError("--%s %s is out of range: it must be %s (see %s --help)", fl.Name, fl.Value.String(), want, cmd.CommandPath())
	})
	return err
}

// numericValue is fl's value as a float64 (a duration in nanoseconds);
// false for a flag that is not numeric.
func numericValue(fs *pflag.FlagSet, fl *pflag.Flag) (float64, bool) {
	switch fl.Value.Type() {
	case "duration":
		d, err := fs.GetDuration(fl.Name)
		return float64(d), err == nil
	case "int":
		n, err := fs.GetInt(fl.Name)
		return float64(n), err == nil
	case "int64":
		n, err := fs.GetInt64(fl.Name)
		return float64(n), err == nil
	case "float64":
		x, err := fs.GetFloat64(fl.Name)
		return x, err == nil
	}
	return 0, false
}

// durationValue is a duration flag parsed by workflow.ParseDuration: a
// value too large for a duration is refused as such, naming the bound
// (pflag's own says only "invalid duration"). Its type is "duration", so
// the range checks read it as pflag's duration flags.
type durationValue struct{ d *time.Duration }

func newDurationValue(d *time.Duration, def time.Duration) durationValue {
	*d = def
	return durationValue{d}
}

func (v durationValue) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := workflow.ParseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (durationValue) Type() string { return "duration" }
