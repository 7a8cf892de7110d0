package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// progress shows a run's steps as they happen, by tailing the run's events
// in the store (the same rows any other process would read). On a terminal
// it keeps a progress bar under the step lines; otherwise it prints plain
// lines only.
//
// Its cost is linear in the number of events: each event is read once (in
// pages of eventPage) and a step's line is made from its events alone —
// its duration from its first node_start of the attempt (the step row's
// started_at) to its end, its tries and error from the end event's payload
// — never by reading the run's step rows again.
type progress struct {
	w      io.Writer
	store  state.Adapter
	runID  string
	total  int
	tty    bool
	bar    *progressbar.ProgressBar
	lastID int64
	start  time.Time
	// paused is set by run_paused and cleared by run_resumed: while set,
	// each poll prints the run's pending waits not shown yet (a wait row
	// is registered just after the pause commits).
	paused bool
	shown  map[string]bool // wait ids printed
	// waitShown: a wait line was printed since the last run_paused (a
	// wait woken before the poll saw it prints neither it nor "resumed").
	waitShown bool
	// storeArg is appended to the wake commands printed (" --db x.db").
	storeArg string
	// started holds when each step instance in flight first started in
	// its attempt (its node_start): entries go when the step ends.
	started map[instanceKey]time.Time
}

// instanceKey names a step instance within an attempt.
type instanceKey struct {
	attempt     int
	scope, step string
}

// eventPage is how many events one read of the store returns.
const eventPage = 1000

func newProgress(w *os.File, store state.Adapter, runID string, total int) *progress {
	p := &progress{w: w, store: store, runID: runID, total: total, start: time.Now(), shown: map[string]bool{},
		started: map[instanceKey]time.Time{},
		tty:     term.IsTerminal(int(w.Fd())) && os.Getenv("TERM") != "dumb"}
	if p.tty {
		p.bar = progressbar.NewOptions(total,
			progressbar.OptionSetWriter(w),
			progressbar.OptionSetWidth(24),
			progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(false),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionSetDescription("starting"),
			progressbar.OptionClearOnFinish(),
		)
	}
	return p
}

func (p *progress) header(name, revision string) {
	fmt.Fprintf(p.w, "run of %s (revision %s)\n", termSafe(name), revision[:12])
}

// follow polls the run's events until ctx is done, then drains what is
// left — until drainBy, when it returns a time (an interrupted `run` must
// exit within its grace period, however many events are left to show).
func (p *progress) follow(ctx context.Context, drainBy func() time.Time) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		p.poll(ctx)
		select {
		case <-ctx.Done():
			dctx := context.WithoutCancel(ctx)
			if by := drainBy(); !by.IsZero() {
				var cancel context.CancelFunc
				dctx, cancel = context.WithDeadline(dctx, by)
				defer cancel()
			}
			p.poll(dctx)
			return
		case <-t.C:
			if p.bar != nil {
				_ = p.bar.RenderBlank()
			}
		}
	}
}

// poll shows the events after the last one shown, a page at a time, until
// none is left or ctx is done.
func (p *progress) poll(ctx context.Context) {
	for ctx.Err() == nil {
		evs, err := p.store.ListEvents(ctx, &state.ListEventsParams{RunID: p.runID, AfterID: p.lastID, Limit: eventPage})
		if err != nil {
			return
		}
		for _, ev := range evs {
			p.lastID = ev.ID
			p.show(ev)
		}
		if len(evs) < eventPage {
			break
		}
	}
	if p.paused && ctx.Err() == nil {
		p.showWaits(ctx)
	}
}

// showWaits prints each pending wait of the paused run once: the step,
// what it waits for, and how to wake it.
func (p *progress) showWaits(ctx context.Context) {
	waits, err := pendingWaits(ctx, p.store, p.runID)
	if err != nil {
		return
	}
	for _, w := range waits {
		if p.shown[w.ID] {
			continue
		}
		p.shown[w.ID] = true
		p.waitShown = true
		p.line(fmt.Sprintf("  ⏸ %-24s %-9s waiting for %s\n    %s", stepLabel(w), "paused", waitsFor(w), wakeHow(p.runID, w, p.storeArg)))
		if hint := noWorkerHint(ctx, p.store, w.WorkspaceID, w); hint != "" {
			p.line("    ! " + hint)
		}
		if p.bar != nil {
			p.bar.Describe("paused at " + termSafe(stepLabel(w)))
		}
	}
}

func (p *progress) show(ev *starflowtype.Event) {
	switch ev.Type {
	case starflowtype.EventNodeStart:
		k := instanceKey{ev.Attempt, ev.ScopePath, ev.NodeID}
		if _, ok := p.started[k]; !ok {
			p.started[k] = ev.CreatedAt
		}
		if p.bar != nil {
			p.bar.Describe("running " + termSafe(ev.NodeID))
		}
	case starflowtype.EventNodeRetry:
		var pl struct {
			Try       int    `json:"try"`
			Error     string `json:"error"`
			BackoffMS int64  `json:"backoff_ms"`
		}
		_ = json.Unmarshal(ev.Payload, &pl)
		p.line(fmt.Sprintf("  ↻ %-20s try %d failed, retrying in %s: %s", name(ev), pl.Try,
			(time.Duration(pl.BackoffMS) * time.Millisecond).Round(time.Millisecond), oneLine(pl.Error)))
	case starflowtype.EventNodeComplete, starflowtype.EventNodeError, starflowtype.EventNodeSkipped:
		mark := map[starflowtype.EventType]string{
			starflowtype.EventNodeComplete: "✓", starflowtype.EventNodeError: "✗", starflowtype.EventNodeSkipped: "–",
		}[ev.Type]
		var pl struct {
			Try       int    `json:"try"`
			Error     string `json:"error"`
			Cancelled bool   `json:"cancelled"` // a lane that lost its race
		}
		_ = json.Unmarshal(ev.Payload, &pl)
		status := statusOf(ev.Type)
		if pl.Cancelled {
			mark, status = "⊘", "cancelled"
		}
		text := fmt.Sprintf("  %s %-24s %-9s", mark, name(ev), status)
		k := instanceKey{ev.Attempt, ev.ScopePath, ev.NodeID}
		var dur time.Duration
		if t, ok := p.started[k]; ok {
			dur = max(ev.CreatedAt.Sub(t), 0).Round(time.Millisecond)
			delete(p.started, k)
		}
		text += fmt.Sprintf(" %7s", dur.String())
		if pl.Try > 1 {
			text += fmt.Sprintf("  (%d tries)", pl.Try)
		}
		if ev.Type == starflowtype.EventNodeError && pl.Error != "" {
			text += "  " + oneLine(pl.Error)
		}
		p.line(text)
		if p.bar != nil && ev.ScopePath == "" {
			_ = p.bar.Add(1)
		}
	case starflowtype.EventRunPaused:
		p.paused, p.waitShown = true, false
	case starflowtype.EventRunResumed:
		if p.paused && p.waitShown {
			p.line("  ⏵ resumed")
		}
		p.paused = false
	case starflowtype.EventRunInterrupted:
		var pl struct {
			Error       string `json:"error"`
			NextAttempt int    `json:"next_attempt"`
			BackoffMS   int64  `json:"backoff_ms"`
		}
		_ = json.Unmarshal(ev.Payload, &pl)
		if pl.NextAttempt > 0 {
			p.line(fmt.Sprintf("  attempt %d failed; attempt %d starts in %s", pl.NextAttempt-1, pl.NextAttempt,
				(time.Duration(pl.BackoffMS) * time.Millisecond).Round(time.Millisecond)))
		}
	}
}

func (p *progress) line(s string) {
	if p.bar != nil {
		_ = p.bar.Clear()
	}
	fmt.Fprintln(p.w, termText(s))
}

// finish prints the outcome; run is nil when waiting was interrupted.
func (p *progress) finish(run *starflowtype.Run) {
	if p.bar != nil {
		_ = p.bar.Finish()
		_ = p.bar.Clear()
	}
	if run == nil {
		return
	}
	if run.CompletedAt.IsZero() { // interrupted: not ended
		fmt.Fprintf(p.w, "run %s %s\n", run.ID, run.Status)
		return
	}
	dur := time.Duration(run.DurationMS) * time.Millisecond
	fmt.Fprintf(p.w, "run %s %s in %s\n", run.ID, run.Status, dur)
	if run.Status == starflowtype.RunSucceeded && len(run.Output) > 0 && string(run.Output) != "null" {
		fmt.Fprintf(p.w, "output: %s\n", termSafe(string(run.Output)))
	}
}

func name(ev *starflowtype.Event) string {
	if ev.ScopePath == "" {
		return termSafe(ev.NodeID)
	}
	return termSafe(ev.ScopePath + "/" + ev.NodeID)
}

func statusOf(t starflowtype.EventType) string {
	switch t {
	case starflowtype.EventNodeComplete:
		return "succeeded"
	case starflowtype.EventNodeError:
		return "failed"
	default:
		return "skipped"
	}
}
