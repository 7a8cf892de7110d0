package starflow

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Remote workers (issue 15, SPEC §9): the operations behind the HTTP
// protocol of docs/api.md "Remote workers" (POST /api/jobs/poll, …), for
// the server and for Go programs that embed the engine. Every call is
// scoped to a workspace ("" = state.DefaultWorkspace for a poll, any for
// the calls that name a job) and to the Env of ctx's Scope (WithScope;
// "" or none = every env): an API key limited to an env serves only the
// jobs of that env's runs. The errors wrap starflowtype.ErrLeaseLost
// (a stale fencing token, an expired lease, a job no longer running),
// ErrNotFound and ErrInvalid.

// JobPollInterval is how often a long poll (PollJob with a wait) looks
// for a job again.
const JobPollInterval = 250 * time.Millisecond

// PollJob claims one queued job of types for worker in workspace, waiting
// up to wait for one to become claimable (0: look once). Returns (nil,
// nil) when none came within wait or ctx ended first.
func (e *Engine) PollJob(ctx context.Context, workspace string, types []string, worker string, wait time.Duration) (*starflowtype.WorkerJob, error) {
	deadline := time.Now().Add(wait)
	p := &state.ClaimJobParams{WorkspaceID: workspace, Env: jobEnv(ctx), Types: types, Worker: worker, RecordPoll: true}
	tick := time.NewTicker(JobPollInterval)
	defer tick.Stop()
	for {
		j, err := e.store.ClaimJob(ctx, p)
		if err != nil || j != nil {
			return j, err
		}
		p.RecordPoll = false
		if !time.Now().Before(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-tick.C:
		}
	}
}

// HeartbeatJob extends the lease of job id held with token, and reports
// progress (a fraction in [0, 1], nil for none) and message to the warm
// tier when there is one (progress is never stored cold).
func (e *Engine) HeartbeatJob(ctx context.Context, workspace, id, token string, progress *float64, message string) (*starflowtype.WorkerJob, error) {
	j, err := e.store.HeartbeatJob(ctx, &state.HeartbeatJobParams{WorkspaceID: workspace, Env: jobEnv(ctx), ID: id, Token: token})
	if err != nil {
		return nil, err
	}
	if e.tier != nil && e.tier.warm != nil && (progress != nil || message != "") {
		f := 0.0
		if progress != nil {
			f = *progress
		}
		e.tier.progress.Report(j.RunID, j.ScopePath, j.StepID, f, message)
	}
	return j, nil
}

// CompleteJob completes job id held with token with output (JSON; nil is
// null): the step succeeds with it and its run is woken, in one
// transaction.
func (e *Engine) CompleteJob(ctx context.Context, workspace, id, token string, output json.RawMessage) (*starflowtype.WorkerJob, error) {
	if err := e.engine.Limits().CheckPayload(len(output)); err != nil {
		return nil, fmt.Errorf("job %s: output: %w", id, err)
	}
	output, err := wakePayload(output)
	if err != nil {
		return nil, fmt.Errorf("job %s: output: %w", id, err)
	}
	j, err := e.store.CompleteJob(ctx, &state.CompleteJobParams{WorkspaceID: workspace, Env: jobEnv(ctx), ID: id, Token: token, Output: output})
	if err == nil {
		e.runner.Notify()
	}
	return j, err
}

// FailJob fails the try of job id held with token with the worker's typed
// error. A retryable failure is tried again when the step's retry_on
// (evaluated over the error alone, engine.JobRetryOn) holds and tries
// remain; otherwise the job fails and so does its step, with info. The
// returned job's Status says which (queued or failed), and AvailableAt
// when it may be claimed again.
func (e *Engine) FailJob(ctx context.Context, workspace, id, token string, info starflowtype.ErrorInfo, retryable bool) (*starflowtype.WorkerJob, error) {
	if info.Type == "" {
		info.Type = starflowtype.ErrorUntyped
	}
	info.StepID, info.ScopePath, info.Cause = "", nil, nil // the engine says where; a worker's error has no cause
	retry := false
	if retryable {
		j, err := e.store.GetJob(ctx, &state.GetJobParams{WorkspaceID: workspace, Env: jobEnv(ctx), ID: id})
		if err != nil {
			return nil, err
		}
		var policy state.JobRetry
		if len(j.Retry) > 0 {
			if err := json.Unmarshal(j.Retry, &policy); err != nil {
				return nil, fmt.Errorf("job %s: its retry policy: %w", id, err)
			}
		}
		ok, err := e.engine.JobRetryOn(ctx, policy.RetryOn, &info)
		if err != nil {
			info.Message = fmt.Sprintf("%s (not tried again: %v)", info.Message, err)
		}
		retry = ok && err == nil
	}
	j, err := e.store.FailJob(ctx, &state.FailJobParams{WorkspaceID: workspace, Env: jobEnv(ctx), ID: id, Token: token, Error: info, Retry: retry})
	if err == nil && j.Status == starflowtype.JobFailed {
		e.runner.Notify()
	}
	return j, err
}

// Job reads one job (in workspace, when not "").
func (e *Engine) Job(ctx context.Context, workspace, id string) (*starflowtype.WorkerJob, error) {
	return e.store.GetJob(ctx, &state.GetJobParams{WorkspaceID: workspace, Env: jobEnv(ctx), ID: id})
}

// jobEnv is the env ctx's Scope limits job calls to ("" = every env):
// unlike ScopeOf, no engine default fills it in.
func jobEnv(ctx context.Context) string {
	sc, _ := ctx.Value(scopeKey{}).(Scope)
	return sc.Env
}

// JobPollers lists the workers that polled for any of types in workspace
// within since (default 1 min), newest first: a run waiting for a type
// nobody polls for is waiting for a worker that is not running.
func (e *Engine) JobPollers(ctx context.Context, workspace string, types []string, since time.Duration) ([]*starflowtype.JobPoller, error) {
	return e.store.JobPollers(ctx, &state.JobPollersParams{WorkspaceID: workspace, Types: types, Since: since})
}
