package client

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
)

// The remote-worker protocol (docs/api.md, "Remote workers"): a worker
// polls for a job of the types it serves, heartbeats while it works, then
// completes or fails it, each call after the poll carrying the claim's
// fencing token. Package jobs is a worker built on these calls.
//
// Errors of these calls are *api.Problem (errors.As), and errors.Is also
// sees the sentinel a status stands for: 409 is starflowtype.ErrLeaseLost
// (the token is stale, the lease expired, or the job is no longer
// running: stop working on it; nothing was changed), 404
// starflowtype.ErrNotFound (no such job in the key's workspace), 400
// starflowtype.ErrInvalid (the request breaks the protocol's bounds).

// PollJob claims one job of one of types for worker (its id, recorded as
// the job's leased_by), waiting up to wait for one to arrive (POST
// /api/jobs/poll; a long-poll: wait is sent in whole seconds, rounded up,
// at most api.JobPollWaitMax = 30 s; 0 answers at once). It returns nil
// and no error when no job arrived in time (204). The client's HTTP
// timeout (60 s by default) must be longer than wait.
func (c *Client) PollJob(ctx context.Context, types []string, worker string, wait time.Duration) (*api.Job, error) {
	req := api.JobPollRequest{Types: types, Worker: worker, WaitS: waitSeconds(wait)}
	out := &api.Job{}
	status, err := c.do(ctx, http.MethodPost, "/api/jobs/poll", nil, nil, req, "", out)
	if err != nil {
		return nil, jobFail(err)
	}
	if status == http.StatusNoContent || out.ID == "" {
		return nil, nil
	}
	if len(out.Input) == 0 || string(out.Input) == "null" {
		out.Input = []byte("{}")
	}
	return out, nil
}

// waitSeconds is wait in whole seconds, rounded up, within 0 to
// api.JobPollWaitMax.
func waitSeconds(wait time.Duration) int {
	if wait <= 0 {
		return 0
	}
	s := int((wait + time.Second - 1) / time.Second)
	return min(s, api.JobPollWaitMax)
}

// HeartbeatJob extends the lease on job id held with fencingToken (POST
// /api/jobs/{id}/heartbeat) by the job's heartbeat timeout and reports
// its progress (req.Progress, 0 to 1, and req.Message, at most
// api.JobMessageMax bytes; both optional). It returns the new lease
// expiry. An error wrapping starflowtype.ErrLeaseLost (409) means the
// worker no longer holds the job and must stop working on it.
func (c *Client) HeartbeatJob(ctx context.Context, id string, req api.JobHeartbeatRequest) (*api.JobHeartbeatResult, error) {
	out := &api.JobHeartbeatResult{}
	if err := c.post(ctx, "/api/jobs/"+esc(id)+"/heartbeat", req, out); err != nil {
		return nil, jobFail(err)
	}
	return out, nil
}

// CompleteJob reports job id done with req.Output (any JSON value; nil is
// null) as the step's output (POST /api/jobs/{id}/complete); the run
// continues. An error wrapping starflowtype.ErrLeaseLost (409) means the
// completion was refused and changed nothing: another claim holds the job
// now, or it ended (it may be this worker's own earlier completion whose
// answer was lost).
func (c *Client) CompleteJob(ctx context.Context, id string, req api.JobCompleteRequest) (*api.JobResult, error) {
	out := &api.JobResult{}
	if err := c.post(ctx, "/api/jobs/"+esc(id)+"/complete", req, out); err != nil {
		return nil, jobFail(err)
	}
	return out, nil
}

// FailJob reports job id failed with the typed error req.Error (POST
// /api/jobs/{id}/fail). With req.Retryable and tries left under the
// step's retry_policy the job is queued again (status queued, RetryAt
// set); otherwise it fails and the step fails with that error (status
// failed). Errors as for CompleteJob.
func (c *Client) FailJob(ctx context.Context, id string, req api.JobFailRequest) (*api.JobResult, error) {
	out := &api.JobResult{}
	if err := c.post(ctx, "/api/jobs/"+esc(id)+"/fail", req, out); err != nil {
		return nil, jobFail(err)
	}
	return out, nil
}

// jobProblem is a problem answer of a job call: errors.As finds the
// *api.Problem, errors.Is the sentinel of its status.
type jobProblem struct {
	p        *api.Problem
	sentinel error
}

func (e *jobProblem) Error() string   { return e.p.Error() }
func (e *jobProblem) Unwrap() []error { return []error{e.p, e.sentinel} }

// jobFail adds the sentinel of a problem's status to err (409
// ErrLeaseLost, 404 ErrNotFound, 400 ErrInvalid); other errors are
// returned as they are.
func jobFail(err error) error {
	var p *api.Problem
	if !errors.As(err, &p) {
		return err
	}
	var sentinel error
	switch p.Status {
	case http.StatusConflict:
		sentinel = starflowtype.ErrLeaseLost
	case http.StatusNotFound:
		sentinel = starflowtype.ErrNotFound
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		sentinel = starflowtype.ErrInvalid
	default:
		return err
	}
	return &jobProblem{p: p, sentinel: sentinel}
}
