package starflow

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/starflow/starflow/internal/maintenance"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Stuck says why a run that has not ended is not moving on its own: one
// typed reason (starflowtype.Stuck: reason, since, detail), computed from
// the cold store as it is now. A run that ended (succeeded, failed,
// cancelled), or that runs under a fresh lease and is not waiting between
// two tries of a step, has none: (nil, nil). Errors: the store's.
func (e *Engine) Stuck(ctx context.Context, run *starflowtype.Run) (*starflowtype.Stuck, error) {
	m, err := e.StuckMany(ctx, []*starflowtype.Run{run})
	if err != nil {
		return nil, err
	}
	return m[run.ID], nil
}

// StuckMany is Stuck for a page of runs, by run id (runs with no reason
// are absent), in a bounded number of statements whatever the page's
// size: one for the runs, one for the live runners and one per queue
// (workspace, env and pool) of its claimable runs, and the same again
// for each level of child runs that waiting_child runs wait for (at most
// starflowtype.StuckChildDepth levels).
func (e *Engine) StuckMany(ctx context.Context, runs []*starflowtype.Run) (map[string]*starflowtype.Stuck, error) {
	var ids []string
	for _, r := range runs {
		if r != nil && !r.Status.Terminal() {
			ids = append(ids, r.ID)
		}
	}
	out := map[string]*starflowtype.Stuck{}
	if len(ids) == 0 {
		return out, nil
	}
	s := &stuckReader{store: e.store}
	if err := s.read(ctx, ids, 0, out); err != nil {
		return nil, fmt.Errorf("starflow: why stuck: %w", err)
	}
	return out, nil
}

// Runners lists the live runners (seen within their lease TTL, database
// clock) that claim runs of ctx's workspace (theirs, or every workspace),
// by id: what serves the queues, from the cold store (workflow_runners).
// A runner writes its row when it starts and on every heartbeat, and
// removes it when it stops cleanly.
func (e *Engine) Runners(ctx context.Context) ([]*starflowtype.Runner, error) {
	rs, err := e.store.ListRunners(ctx, &state.ListRunnersParams{WorkspaceID: e.workspace(ctx), Live: true})
	if err != nil {
		return nil, fmt.Errorf("starflow: runners: %w", err)
	}
	return rs, nil
}

// stuckReader reads the reasons of one StuckMany, the live runners and
// each queue's head read once.
type stuckReader struct {
	store       state.Adapter
	runners     []*starflowtype.Runner
	runnersRead bool                            // runners read
	queues      map[queueKey][]*state.QueuedRun // by queue
}

type queueKey struct{ workspace, env, pool string }

// read puts the reasons of runs ids (at child depth depth) into out.
func (s *stuckReader) read(ctx context.Context, ids []string, depth int, out map[string]*starflowtype.Stuck) error {
	rows, err := s.store.RunsStuck(ctx, &state.RunsStuckParams{RunIDs: ids})
	if err != nil {
		return err
	}
	var children []string
	for _, row := range rows {
		st, err := s.reason(ctx, row)
		if err != nil {
			return err
		}
		if st == nil {
			continue
		}
		out[row.RunID] = st
		if st.Reason == starflowtype.StuckWaitingChild && st.Detail.ChildRunID != "" && depth < starflowtype.StuckChildDepth {
			children = append(children, st.Detail.ChildRunID)
		}
	}
	if len(children) == 0 {
		return nil
	}
	kids := map[string]*starflowtype.Stuck{}
	if err := s.read(ctx, children, depth+1, kids); err != nil {
		return err
	}
	for _, st := range out {
		if st.Reason == starflowtype.StuckWaitingChild {
			if kid := kids[st.Detail.ChildRunID]; kid != nil {
				st.Detail.Child = kid
				st.Detail.Message += "; the child is " + string(kid.Reason) + ": " + kid.Detail.Message
			}
		}
	}
	return nil
}

// reason turns a stuck row into its reason (nil for ClassNone).
func (s *stuckReader) reason(ctx context.Context, r *state.StuckRow) (*starflowtype.Stuck, error) {
	st := &starflowtype.Stuck{Since: r.Since}
	d := &st.Detail
	since := stuckTime(r.Since)
	switch r.Class {
	case state.ClassNone:
		return nil, nil
	case state.ClassWaitingSignal, state.ClassWaitingApproval, state.ClassWaitingTimer, state.ClassWaitingChild, state.ClassWaitingJob:
		st.Reason = state.ClassReason(r.Class)
		d.StepID, d.ScopePath, d.ExpiresAt = r.WaitStepID, r.WaitScopePath, r.WaitExpiresAt
		at := stepName(r.WaitStepID, r.WaitScopePath)
		switch r.WaitKind {
		case starflowtype.WaitSignal:
			d.Signal = r.WaitSignal
			d.Message = fmt.Sprintf("waiting for signal %s at %s since %s", r.WaitSignal, at, since)
		case starflowtype.WaitApproval:
			d.Signal = r.WaitSignal
			d.Message = fmt.Sprintf("waiting for approval (signal %s) at %s since %s", r.WaitSignal, at, since)
		case starflowtype.WaitTimer:
			d.Until = r.WaitWakeAt
			d.Message = fmt.Sprintf("waiting for a timer at %s until %s", at, stuckTime(r.WaitWakeAt))
		case starflowtype.WaitChild:
			d.ChildRunID = r.WaitKey
			d.Message = fmt.Sprintf("waiting for child run %s at %s since %s", r.WaitKey, at, since)
		case starflowtype.WaitJob:
			d.JobType = strings.TrimPrefix(r.WaitSignal, starflowtype.JobSignal+":")
			d.Message = fmt.Sprintf("waiting for a remote worker to finish job %s at %s since %s", d.JobType, at, since)
			if polled, err := s.store.JobPollers(ctx, &state.JobPollersParams{WorkspaceID: r.WorkspaceID, Types: []string{d.JobType}, Since: JobPollersRecent}); err == nil && len(polled) == 0 {
				d.Message += fmt.Sprintf("; no worker has polled for job type %s in the last %s (start one: docs/api.md, Remote workers)", d.JobType, JobPollersRecent)
			}
		}
		if !r.WaitExpiresAt.IsZero() {
			d.Message += ", timing out at " + stuckTime(r.WaitExpiresAt)
		}
	case state.ClassDelayed:
		st.Reason, d.Until = starflowtype.StuckWaitingTimer, r.AvailableAt
		d.Message = "enqueued with a delay: claimable from " + stuckTime(r.AvailableAt)
	case state.ClassRetryStep:
		st.Reason = starflowtype.StuckRetryBackoff
		d.StepID, d.ScopePath, d.Attempt, d.Try = r.StepID, r.StepScopePath, r.Attempt, r.StepTries+1
		if !r.RetryAt.IsZero() {
			d.NextAt = r.RetryAt.Add(r.RetryBackoff)
		}
		d.Message = fmt.Sprintf("%s failed try %d and waits to retry: try %d due at %s", stepName(r.StepID, r.StepScopePath),
			r.StepTries, r.StepTries+1, stuckTime(d.NextAt))
	case state.ClassRetryRun:
		st.Reason = starflowtype.StuckRetryBackoff
		d.Attempt, d.NextAt = r.Attempt, r.AvailableAt
		d.Message = fmt.Sprintf("attempt %d failed (%s); attempt %d of %d is due at %s", r.Attempt-1, shortCause(r.Error),
			r.Attempt, r.MaxAttempts, stuckTime(r.AvailableAt))
	case state.ClassQueued:
		return s.queued(ctx, r, st)
	case state.ClassLeaseStale:
		st.Reason = starflowtype.StuckLeaseStale
		d.Runner, d.LastHeartbeat = r.LeasedBy, r.LastHeartbeat
		d.Message = fmt.Sprintf("runner %s holds the lease, but it ran out at %s (last heartbeat %s): the runner is probably gone, and the lease sweep will interrupt the run",
			r.LeasedBy, since, stuckTime(r.LastHeartbeat))
	case state.ClassCancelRequested:
		st.Reason = starflowtype.StuckCancelRequested
		d.StepID, d.ScopePath, d.Runner, d.LastHeartbeat = r.StepID, r.StepScopePath, r.LeasedBy, r.LastHeartbeat
		if r.StepID != "" {
			d.Message = fmt.Sprintf("cancel requested at %s; waiting for %s in flight to finish (runner %s)", since,
				stepName(r.StepID, r.StepScopePath), r.LeasedBy)
		} else {
			d.Message = fmt.Sprintf("cancel requested at %s; runner %s stops the run at its next step boundary", since, r.LeasedBy)
		}
	case state.ClassInterrupted:
		st.Reason = starflowtype.StuckInterrupted
		d.Cause, d.Attempt, d.AttemptsLeft, d.Mode = shortCause(r.Error), r.Attempt, max(r.MaxAttempts-r.Attempt, 0), r.RecoveryMode
		if r.RecoveryMode == starflowtype.RecoveryManual {
			d.Message = fmt.Sprintf("interrupted (%s) since %s and held for an operator: recovery mode manual; %s; resume or retrigger it",
				d.Cause, since, attemptsLeft(d.AttemptsLeft))
		} else {
			d.Message = fmt.Sprintf("interrupted (%s) since %s (recovery mode %s; %s)", d.Cause, since, r.RecoveryMode, attemptsLeft(d.AttemptsLeft))
		}
	default:
		return nil, nil // a class this version does not know: no reason rather than a wrong one
	}
	return st, nil
}

// queued is the reason of a claimable run: no live runner serves its
// workspace and pool, or its place in its queue.
func (s *stuckReader) queued(ctx context.Context, r *state.StuckRow, st *starflowtype.Stuck) (*starflowtype.Stuck, error) {
	d := &st.Detail
	d.Pool = r.Pool
	since := stuckTime(r.Since)
	if !s.runnersRead {
		rs, err := s.store.ListRunners(ctx, &state.ListRunnersParams{Live: true})
		if err != nil {
			return nil, err
		}
		s.runners, s.runnersRead = rs, true
	}
	if st.Reason = maintenance.QueuedReason(s.runners, r.WorkspaceID, r.Pool); st.Reason == starflowtype.StuckQueuedNoRunner {
		if r.Pool == "" {
			d.Message = fmt.Sprintf("queued since %s, but no live runner claims runs of workspace %s", since, r.WorkspaceID)
		} else {
			d.Message = fmt.Sprintf("queued since %s, but no live runner serves pool %s (of workspace %s)", since, r.Pool, r.WorkspaceID)
		}
		return st, nil
	}
	k := queueKey{r.WorkspaceID, r.Env, r.Pool}
	head, ok := s.queues[k]
	if !ok {
		var err error
		head, err = s.store.QueueHead(ctx, &state.QueueHeadParams{WorkspaceID: k.workspace, Env: k.env, Pool: k.pool,
			Limit: starflowtype.QueuePositionMax + 1})
		if err != nil {
			return nil, err
		}
		if s.queues == nil {
			s.queues = map[queueKey][]*state.QueuedRun{}
		}
		s.queues[k] = head
	}
	d.Position = starflowtype.QueuePositionMax + 1
	for i, q := range head {
		if q.ID == r.RunID {
			d.Position = i + 1
			break
		}
	}
	if len(head) > 0 && head[0].ID != r.RunID {
		d.OldestAhead = head[0].ID
	}
	switch {
	case d.Position == 1:
		d.Message = fmt.Sprintf("queued since %s: next in line, waiting for a free runner slot", since)
	case d.Position > starflowtype.QueuePositionMax:
		d.Message = fmt.Sprintf("queued since %s, further back than %d runs in its queue (run %s is first)", since,
			starflowtype.QueuePositionMax, d.OldestAhead)
	default:
		d.Message = fmt.Sprintf("queued since %s: position %d in its queue, behind run %s", since, d.Position, d.OldestAhead)
	}
	return st, nil
}

// JobPollersRecent is how recent a poll must be for a stuck reason (and
// `starflow run`) to count a worker of a job type as running.
const JobPollersRecent = time.Minute

// stepName names a step instance in a sentence.
func stepName(id, scope string) string {
	if scope == "" {
		return "step " + id
	}
	return "step " + id + " (" + scope + ")"
}

// stuckTime is a time in a reason's message ("?" when unknown).
func stuckTime(t time.Time) string {
	if t.IsZero() {
		return "?"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// shortCause is an error as a reason's cause: one line, at most 200
// characters.
func shortCause(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "no error recorded"
	}
	if r := []rune(s); len(r) > 200 {
		return string(r[:199]) + "…"
	}
	return s
}

func attemptsLeft(n int) string {
	switch n {
	case 0:
		return "no attempts left"
	case 1:
		return "1 attempt left"
	}
	return fmt.Sprintf("%d attempts left", n)
}
