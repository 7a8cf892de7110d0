package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// What a paused run waits for, and how to wake it, in the words every
// command uses: `run` when its run parks or is interrupted while parked,
// `runs show`, and `runs resume`/`retrigger` refusing a paused run.

// pendingWaits are the run's pending waits, oldest first.
func pendingWaits(ctx context.Context, store state.Adapter, runID string) ([]*starflowtype.Wait, error) {
	return store.ListWaits(ctx, &state.ListWaitsParams{RunID: runID, Status: []starflowtype.WaitStatus{starflowtype.WaitPending}})
}

// waitsFor says what w waits for: "signal approve", "timer until T",
// "approval (signal S)", "child run ID", with its timeout if any.
func waitsFor(w *starflowtype.Wait) string {
	var s string
	switch w.Kind {
	case starflowtype.WaitTimer:
		s = "timer until " + fmtTime(w.WakeAt)
	case starflowtype.WaitApproval:
		s = "approval (signal " + termSafe(w.Signal) + ")"
	case starflowtype.WaitChild:
		s = "child run " + termSafe(w.CorrelationKey)
	case starflowtype.WaitJob:
		s = "a remote worker of job type " + termSafe(jobType(w))
	default:
		s = "signal " + termSafe(w.Signal)
	}
	if w.CorrelationKey != "" && w.Kind != starflowtype.WaitChild && w.Kind != starflowtype.WaitJob {
		s += " with correlation key " + termSafe(w.CorrelationKey)
	}
	if !w.ExpiresAt.IsZero() {
		s += ", timing out at " + fmtTime(w.ExpiresAt)
	}
	return s
}

// pausedAt is "paused at step S waiting for …" for the run's pending
// waits ("paused" alone when none is registered yet).
func pausedAt(waits []*starflowtype.Wait) string {
	if len(waits) == 0 {
		return "paused"
	}
	parts := make([]string, len(waits))
	for i, w := range waits {
		parts[i] = "at step " + stepLabel(w) + " waiting for " + waitsFor(w)
	}
	return "paused " + strings.Join(parts, ", and ")
}

// samplePayload is the --payload shown in wake commands.
func samplePayload(w *starflowtype.Wait) string {
	if w.Kind == starflowtype.WaitApproval {
		return `'{"approved": true}'`
	}
	return `'{}'`
}

// wakeHow says how w is woken: the exact command for a signal or an
// approval (storeArg, e.g. " --db x.db", appended), the token of a
// notified wait, and when a timer or a child run wakes it on its own.
func wakeHow(runID string, w *starflowtype.Wait, storeArg string) string {
	switch w.Kind {
	case starflowtype.WaitTimer:
		return "it fires at " + fmtTime(w.WakeAt) + " (in " + until(w.WakeAt) + ") in a process with a timer poller: this `starflow run` while it waits, or the maintenance leader among `starflow dev`, `worker` and `server`"
	case starflowtype.WaitChild:
		return "it wakes when child run " + termSafe(w.CorrelationKey) + " ends (starflow runs show " + termSafe(w.CorrelationKey) + ")"
	case starflowtype.WaitJob:
		return "it wakes when a worker serving job type " + termSafe(jobType(w)) + " completes or fails its job: workers poll " +
			"POST /api/jobs/poll on `starflow dev` or `starflow server` (docs/api.md, Remote workers; examples/workers)"
	}
	s := fmt.Sprintf("wake it: starflow signal %s %s --payload %s%s", runID, termSafe(w.Signal), samplePayload(w), storeArg)
	if len(w.Notify) > 0 {
		s += fmt.Sprintf("; or with the token sent to its notify URL: starflow wake TOKEN --payload %s%s (or POST the payload to the wake_url it received)",
			samplePayload(w), storeArg)
	}
	return s
}

// jobType is the job type of job wait w (its signal is starflow.job:TYPE).
func jobType(w *starflowtype.Wait) string {
	return strings.TrimPrefix(w.Signal, starflowtype.JobSignal+":")
}

// noWorkerHint warns, for a job wait, when no worker polled for its job
// type within starflow.JobPollersRecent; "" otherwise (or when the store
// cannot say).
func noWorkerHint(ctx context.Context, store state.Adapter, ws string, w *starflowtype.Wait) string {
	if w.Kind != starflowtype.WaitJob {
		return ""
	}
	typ := jobType(w)
	polled, err := store.JobPollers(ctx, &state.JobPollersParams{WorkspaceID: ws, Types: []string{typ}, Since: starflow.JobPollersRecent})
	if err != nil || len(polled) > 0 {
		return ""
	}
	return fmt.Sprintf("no worker has polled for job type %s in the last %s: the run waits until one does", termSafe(typ), starflow.JobPollersRecent)
}

// until is how long from now to t, rounded to the second ("0s" when past).
func until(t time.Time) string {
	d := time.Until(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String()
}

// storeArg is the store flag to repeat in printed commands: the --db or
// --store the user gave (an environment variable is seen by the next
// command too), "" for the default.
func (g *globalFlags) storeArg() string {
	switch {
	case g.store != "":
		u := g.store
		if i, j := strings.Index(u, "://"), strings.Index(u, "@"); i >= 0 && j > i && strings.Contains(u[i+3:j], ":") {
			u = redactURL(u) // a password is never printed
		}
		return " --store '" + u + "'"
	case g.db != "":
		return " --db " + g.db
	}
	return ""
}
