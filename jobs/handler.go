package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"time"
	"unicode/utf8"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/backoff"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// ProgressInterval is the shortest time between two heartbeats that
// Job.Progress calls bring forward: progress goes out with the next
// heartbeat, at most this long after the previous one was sent.
const ProgressInterval = time.Second

// ReportRetryFor bounds how long a worker keeps trying to report a job's
// result (complete or fail) when the server cannot be reached or answers
// 5xx or 429; meanwhile it keeps the lease with heartbeats. Past it the
// result is dropped and logged: the lease expires and the server queues
// the job again.
const ReportRetryFor = time.Minute

// Job is one claimed job as its handler sees it: the server's api.Job —
// ID, Type, Input (the raw JSON the handler's In was decoded from),
// RunID, ScopePath, StepID, Attempt (the run's), Tries (this claim's try,
// from 1), IdempotencyKey (the same for every try of the step instance,
// across the run's attempts: deduplicate side effects with it), FencingToken, LeaseUntil (as claimed) and
// HeartbeatTimeoutMS — and the job's logger.
type Job struct {
	api.Job
	// Logger is the worker's logger with the job's id, type, run, step,
	// scope path and try.
	Logger *slog.Logger

	lease *lease
}

// Progress reports how far the job is to the run's live views: fraction
// from 0 to 1 (clamped; NaN leaves the fraction out) and a message (cut
// to api.JobMessageMax bytes, at a character boundary). It is sent with a
// heartbeat: the next one, brought forward to ProgressInterval (1 s) after
// the previous one, so calling it often costs nothing; only the latest
// call is sent. Safe for concurrent use; once the handler has returned it
// does nothing.
func (j *Job) Progress(fraction float64, message string) {
	if j == nil || j.lease == nil {
		return
	}
	var f *float64
	if !math.IsNaN(fraction) {
		v := min(max(fraction, 0), 1)
		f = &v
	}
	j.lease.setProgress(f, truncate(message, api.JobMessageMax))
}

// HeartbeatTimeout is how long a claim or a heartbeat holds the job's
// lease (the step's job.heartbeat_timeout). The worker heartbeats every
// third of it.
func (j *Job) HeartbeatTimeout() time.Duration {
	return heartbeatTimeout(&j.Job)
}

func heartbeatTimeout(j *api.Job) time.Duration {
	if j.HeartbeatTimeoutMS <= 0 { // the server always sends it; the step's default
		return 30 * time.Second
	}
	return time.Duration(j.HeartbeatTimeoutMS) * time.Millisecond
}

// truncate cuts s to at most n bytes without splitting a character.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// handlerFunc runs one job: the output as JSON, or the error to fail it
// with.
type handlerFunc func(ctx context.Context, job *Job) (json.RawMessage, error)

// Handle registers fn as w's handler of job type jobType (a job step's
// job.type: 1 to 200 characters of letters, digits and _ . : / -). For
// each job of that type, the job's JSON input is decoded into an In
// (encoding/json rules; an input that does not decode fails the job at
// once, not retried, with error type input_invalid), fn runs, and its Out
// is encoded as JSON as the step's output (one that does not encode fails
// the job, not retried).
//
// An error fn returns fails the job; the step sees it as error (what a
// catch, retry_on and catch_when test):
//   - a *step.Error (errors.As finds it through wrapping) keeps its Type
//     (default "error"), Message and Details, and Retryable says whether
//     another try may succeed;
//   - any other error is type "error" with the error's text as message,
//     and retryable;
//   - an error wrapped with step.Permanent is never retryable.
//
// A retryable failure is tried again (by any worker) while the step's
// retry_policy allows, with its backoff. A panic in fn fails the job, not
// retried, with type "error" and message "job handler panicked: …" (the
// stack goes to the log); the worker goes on.
//
// fn's context is cancelled when the worker loses the job's lease (cause
// ErrLeaseLost; what fn returns then is dropped) and when the worker's
// shutdown grace passes (cause ErrShutdown); fn must return soon after.
//
// Errors: w or fn is nil, jobType is not a valid type, it has a handler
// already, w serves api.JobPollTypesMax (50) types already, or w is
// running.
func Handle[In, Out any](w *Worker, jobType string, fn func(ctx context.Context, job *Job, in In) (Out, error)) error {
	switch {
	case w == nil:
		return errors.New("jobs: Handle needs a worker (jobs.NewWorker)")
	case fn == nil:
		return fmt.Errorf("jobs: the handler of job type %q is nil", jobType)
	case !workflow.ValidSignal(jobType):
		return fmt.Errorf("jobs: job type %q must be 1 to 200 characters of letters, digits and _ . : / - (and not start with %q)", jobType, workflow.ReservedSignalPrefix)
	}
	return w.register(jobType, func(ctx context.Context, job *Job) (json.RawMessage, error) {
		var in In
		if err := json.Unmarshal(job.Input, &in); err != nil {
			return nil, &step.Error{Type: starflowtype.ErrorInputInvalid,
				Message: fmt.Sprintf("the input of job type %s does not decode into %T: %v", jobType, in, err)}
		}
		out, err := fn(ctx, job, in)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(out)
		if err != nil {
			return nil, step.Permanent(fmt.Errorf("the output of job type %s does not encode as JSON: %w", jobType, err))
		}
		return raw, nil
	})
}

// runJob runs one claimed job: the handler under the job's lease, then
// its report. ctx is the jobs' context of Run (cancelled with ErrShutdown
// when the grace passes); claimed is when the poll that claimed the job
// answered, which starts the lease on this worker's clock.
func (w *Worker) runJob(ctx context.Context, aj *api.Job, claimed time.Time) {
	log := w.log.With("job_id", aj.ID, "job_type", aj.Type, "run_id", aj.RunID, "step_id", aj.StepID,
		"scope_path", aj.ScopePath, "try", aj.Tries)
	// leaseCtx ends only when the lease is lost; the handler's context
	// also at shutdown; the report runs under leaseCtx.
	leaseCtx, lose := context.WithCancelCause(context.WithoutCancel(ctx))
	defer lose(nil)
	hctx, cancel := context.WithCancelCause(leaseCtx)
	defer cancel(nil)
	stopShutdown := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stopShutdown()

	l := newLease(w, aj, lose, log)
	holdCtx, stopHold := context.WithCancel(leaseCtx)
	held := make(chan struct{})
	go func() { defer close(held); l.hold(holdCtx, claimed) }()
	defer func() { stopHold(); <-held }()

	var out json.RawMessage
	var err error
	if h := w.handler(aj.Type); h == nil {
		err = &step.Error{Type: starflowtype.ErrorUntyped, Retryable: true,
			Message: fmt.Sprintf("worker %s has no handler for job type %q", w.opts.WorkerID, aj.Type)}
	} else {
		out, err = call(hctx, h, &Job{Job: *aj, Logger: log, lease: l}, log)
	}
	l.end()
	switch {
	case leaseCtx.Err() != nil:
		log.Warn("jobs: the job's lease was lost; its result is dropped", "cause", context.Cause(leaseCtx))
		return
	case err != nil && errors.Is(context.Cause(hctx), ErrShutdown):
		log.Warn("jobs: the job was cancelled at shutdown and is not reported: its lease expires and the server queues it again", "error", err)
		return
	}
	w.report(leaseCtx, aj, out, err, log)
}

// call runs h, turning a panic into a failure that is not retried.
func call(ctx context.Context, h handlerFunc, job *Job, log *slog.Logger) (out json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("jobs: the job handler panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			out, err = nil, step.Permanent(fmt.Errorf("job handler panicked: %v", p))
		}
	}()
	return h(ctx, job)
}

// failure is the typed error and the retryable flag a handler's error is
// reported with (see Handle).
func failure(err error) (starflowtype.ErrorInfo, bool) {
	retryable := !step.IsPermanent(err)
	info := starflowtype.ErrorInfo{Type: starflowtype.ErrorUntyped, Message: err.Error()}
	if se := (*step.Error)(nil); errors.As(err, &se) {
		info = starflowtype.ErrorInfo{Type: se.Type, Message: se.Message, Details: se.Details}
		if info.Type == "" {
			info.Type = starflowtype.ErrorUntyped
		}
		retryable = retryable && se.Retryable
	}
	if info.Message == "" {
		info.Message = info.Type
	}
	if info.Details != nil {
		if _, derr := json.Marshal(info.Details); derr != nil {
			info.Details = nil
			info.Message += fmt.Sprintf(" (its details were left out: they do not encode as JSON: %v)", derr)
		}
	}
	return info, retryable
}

// report sends the job's result: complete with out when herr is nil,
// else fail with herr (see failure). It retries what may pass (the server
// unreachable, 5xx, 429) for up to ReportRetryFor while ctx (the lease)
// holds. An output the server refuses (400, 413, 422) fails the job
// instead, not retried.
func (w *Worker) report(ctx context.Context, aj *api.Job, out json.RawMessage, herr error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, ReportRetryFor)
	defer cancel()
	for n := 1; ; n++ {
		var res *api.JobResult
		var err error
		if herr == nil {
			res, err = w.c.CompleteJob(ctx, aj.ID, api.JobCompleteRequest{FencingToken: aj.FencingToken, Output: out})
		} else {
			info, retryable := failure(herr)
			res, err = w.c.FailJob(ctx, aj.ID, api.JobFailRequest{FencingToken: aj.FencingToken, Error: info, Retryable: retryable})
		}
		var p *api.Problem
		switch {
		case err == nil:
			if herr == nil {
				log.Info("jobs: job completed", "status", res.Status)
			} else {
				log.Info("jobs: job failed", "status", res.Status, "error", herr, "retry_at", res.RetryAt)
			}
			return
		case errors.Is(err, ErrLeaseLost) && n > 1:
			log.Warn("jobs: the server refused the job's result (409): the lease was lost or the job ended — perhaps by an earlier send of this result whose answer did not arrive", "error", err)
			return
		case errors.Is(err, ErrLeaseLost):
			log.Warn("jobs: the server refused the job's result (409): the lease was lost or the job ended; nothing changed", "error", err)
			return
		case errors.Is(err, starflowtype.ErrNotFound):
			log.Warn("jobs: the server no longer knows the job (404); its result is dropped", "error", err)
			return
		case herr == nil && errors.As(err, &p) && (p.Status == 400 || p.Status == 413 || p.Status == 422):
			log.Warn("jobs: the server refused the job's output; failing the job", "error", err)
			herr = step.Permanent(fmt.Errorf("the server refused the job's output: %w", err))
			continue
		case ctx.Err() != nil:
			log.Error("jobs: giving up reporting the job's result; its lease expires and the server queues it again", "error", err, "cause", context.Cause(ctx))
			return
		case pollRefused(err):
			log.Error("jobs: the server refused the job's result", "error", err)
			return
		}
		delay := backoff.Exponential(pollRetryMin, pollRetryMax, 2, n)
		log.Warn("jobs: reporting the job's result failed; retrying", "error", err, "retry_in", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}
