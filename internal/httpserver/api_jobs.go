package httpserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/workflow"
)

// The remote-worker protocol (issue 15; api/jobs.go, docs/api.md "Remote
// workers"): keys of role worker (or admin) poll for the jobs of their
// workspace, heartbeat them, and complete or fail them with the fencing
// token of their claim. A stale token is 409 lease_lost and changes
// nothing.

// metaLongPoll marks an operation that may answer after the server's
// write timeout (the long poll): authorize extends its write deadline.
const metaLongPoll = "longPoll"

// longPollSlack is how much longer than its wait a long poll may take to
// answer (the claim itself, a slow store).
const longPollSlack = 15 * time.Second

type jobOutput struct {
	Status int
	Body   *api.Job
}

type JobIDParam struct {
	ID string `path:"id" doc:"The job's id." maxLength:"64"`
}

type jobResultOutput struct{ Body *api.JobResult }

type jobHeartbeatOutput struct{ Body *api.JobHeartbeatResult }

func (s *apiServer) registerJobs() {
	huma.Register(s.api, with(withErrors(op("poll-jobs", http.MethodPost, "/api/jobs/poll", starflowtype.RoleWorker,
		"Claim one queued job of the given types, waiting up to wait_s for one (long-poll): 200 with the job and its lease, or 204", "jobs")),
		func(o *huma.Operation) {
			o.Metadata[metaLongPoll] = true
			o.Responses = map[string]*huma.Response{"204": {Description: "No job came within wait_s."}}
		}),
		func(ctx context.Context, in *struct{ Body api.JobPollRequest }) (*jobOutput, error) {
			for _, t := range in.Body.Types {
				if !workflow.ValidSignal(t) {
					return nil, huma.Error422UnprocessableEntity(fmt.Sprintf("job type %q must be 1 to 200 characters of letters, digits and _ . : / - (and not start with %q)", t, workflow.ReservedSignalPrefix))
				}
			}
			wait := time.Duration(in.Body.WaitS) * time.Second
			ctx, cancel := context.WithTimeout(ctx, wait+s.cfg.Timeout)
			defer cancel()
			j, err := s.engine.PollJob(ctx, principalOf(ctx).workspace, in.Body.Types, in.Body.Worker, wait)
			if err != nil {
				return nil, s.fail(err)
			}
			if j == nil {
				return &jobOutput{Status: http.StatusNoContent}, nil
			}
			return &jobOutput{Status: http.StatusOK, Body: jobView(j)}, nil
		})
	huma.Register(s.api, withErrors(op("heartbeat-job", http.MethodPost, "/api/jobs/{id}/heartbeat", starflowtype.RoleWorker,
		"Extend the lease of a job this worker holds (and report its progress)", "jobs"),
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *struct {
			JobIDParam
			Body api.JobHeartbeatRequest
		}) (*jobHeartbeatOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			j, err := s.engine.HeartbeatJob(ctx, principalOf(ctx).workspace, in.ID, in.Body.FencingToken, in.Body.Progress, in.Body.Message)
			if err != nil {
				return nil, s.fail(err)
			}
			return &jobHeartbeatOutput{Body: &api.JobHeartbeatResult{LeaseUntil: j.LeaseUntil.UTC()}}, nil
		})
	payloadCap := func(o *huma.Operation) {
		*o = s.withBody(*o, bodyRule{limit: workflow.LimitPayloadBytes, max: s.engine.Limits().PayloadBytes, json: true})
	}
	huma.Register(s.api, with(withErrors(op("complete-job", http.MethodPost, "/api/jobs/{id}/complete", starflowtype.RoleWorker,
		"Complete a job this worker holds with its output: the step succeeds and the run goes on", "jobs"),
		http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge), payloadCap),
		func(ctx context.Context, in *struct {
			JobIDParam
			Body api.JobCompleteRequest
		}) (*jobResultOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			j, err := s.engine.CompleteJob(ctx, principalOf(ctx).workspace, in.ID, in.Body.FencingToken, in.Body.Output)
			if err != nil {
				return nil, s.fail(err)
			}
			return &jobResultOutput{Body: &api.JobResult{ID: j.ID, Status: string(j.Status)}}, nil
		})
	huma.Register(s.api, with(withErrors(op("fail-job", http.MethodPost, "/api/jobs/{id}/fail", starflowtype.RoleWorker,
		"Fail a try of a job this worker holds: tried again when retryable and the step's retry_policy allows, else the step fails with the error", "jobs"),
		http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge), payloadCap),
		func(ctx context.Context, in *struct {
			JobIDParam
			Body api.JobFailRequest
		}) (*jobResultOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			j, err := s.engine.FailJob(ctx, principalOf(ctx).workspace, in.ID, in.Body.FencingToken, in.Body.Error, in.Body.Retryable)
			if err != nil {
				return nil, s.fail(err)
			}
			out := &api.JobResult{ID: j.ID, Status: string(j.Status)}
			if j.Status == starflowtype.JobQueued {
				at := j.AvailableAt.UTC()
				out.RetryAt = &at
			}
			return &jobResultOutput{Body: out}, nil
		})
}

// extendLongPoll lifts the server's write timeout for a long poll (its
// answer may come wait_s, up to api.JobPollWaitMax, after the request).
func extendLongPoll(hctx huma.Context) {
	_, w := humago.Unwrap(hctx)
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(api.JobPollWaitMax*time.Second + longPollSlack))
}

// jobView is a claimed job as the protocol gives it.
func jobView(j *starflowtype.WorkerJob) *api.Job {
	in := j.Input
	if len(in) == 0 {
		in = []byte("{}")
	}
	return &api.Job{ID: j.ID, Type: j.Type, Input: in, RunID: j.RunID, ScopePath: j.ScopePath, StepID: j.StepID,
		Attempt: j.Attempt, Tries: j.Tries, IdempotencyKey: j.IdempotencyKey, FencingToken: j.LeaseToken,
		LeaseUntil: j.LeaseUntil.UTC(), HeartbeatTimeoutMS: j.HeartbeatTimeout.Milliseconds()}
}
