package storecore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/starflow/starflow/internal/backoff"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Remote workers' jobs (state.Jobs, issue 15). A job is written with its
// step's wait (insertJob, from RegisterWait) and ends with it: completing
// or finally failing a job wakes the wait in the same transaction
// (t.wake), and whatever closes the wait otherwise cancels the job
// (closeJob, from t.wake and cancelWaits).

// insertJob writes the job of job wait w (RegisterWait, inside its
// transaction).
func (t *txn) insertJob(ctx context.Context, w *starflowtype.Wait, workspace, env string, j *state.JobSpec) error {
	retry, err := json.Marshal(j.Retry)
	if err != nil {
		return fmt.Errorf("job %s: retry policy: %w", w.ID, err)
	}
	input := j.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	_, err = t.tx.Exec(ctx, "insert_job", w.ID, workspace, w.RunID, w.Attempt, w.ScopePath, w.StepID, j.Type,
		j.MaxTries, j.HeartbeatTimeout.Milliseconds(), string(retry), j.IdempotencyKey, string(input), env)
	return err
}

// closeJob cancels the job of wait w when w is a job wait whose job has
// not ended: its wait was closed without it.
func (t *txn) closeJob(ctx context.Context, w *starflowtype.Wait) error {
	if w.Kind != starflowtype.WaitJob {
		return nil
	}
	_, err := t.tx.Exec(ctx, "close_job", w.ID)
	return err
}

// ClaimJob implements state.Jobs.
func (s *Store) ClaimJob(ctx context.Context, p *state.ClaimJobParams) (*starflowtype.WorkerJob, error) {
	if len(p.Types) == 0 || p.Worker == "" {
		return nil, s.errorf("claim job: %w", starflowtype.Invalid(errors.New("a poll needs at least one job type and a worker id")))
	}
	types := slices.Compact(slices.Sorted(slices.Values(p.Types))) // one row per type in worker_job_pollers
	ws := orDefault(p.WorkspaceID, state.DefaultWorkspace)
	var out *starflowtype.WorkerJob
	_, err := s.write(ctx, state.OpClaimJob, "", false, func(t *txn) error {
		out = nil
		if p.RecordPoll {
			if _, err := t.tx.Exec(ctx, "record_job_poll", ws, types, p.Worker); err != nil {
				return fmt.Errorf("record poll: %w", err)
			}
		}
		var id string
		var heartbeatMS int64
		err := t.tx.QueryRow(ctx, "pick_job", ws, types, p.Env).Scan(&id, &heartbeatMS)
		if isNoRows(err) {
			t.idle = true
			return nil
		}
		if err != nil {
			return err
		}
		token, err := newLeaseToken()
		if err != nil {
			return err
		}
		j, err := scanJob(t.tx.QueryRow(ctx, "claim_job", id, p.Worker, token, time.Duration(heartbeatMS)*time.Millisecond))
		if err != nil {
			return fmt.Errorf("claim job %s: %w", id, err)
		}
		out = j
		return nil
	})
	if err != nil {
		return nil, s.errorf("claim job: %w", err)
	}
	return out, nil
}

// newLeaseToken is a fencing token: 128 random bits, hex.
func newLeaseToken() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("fencing token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// GetJob implements state.Jobs.
func (s *Store) GetJob(ctx context.Context, p *state.GetJobParams) (*starflowtype.WorkerJob, error) {
	j, err := s.getJob(ctx, s.reader(), p.WorkspaceID, p.Env, p.ID)
	if err != nil {
		return nil, s.errorf("get job: %w", err)
	}
	return j, nil
}

func (s *Store) getJob(ctx context.Context, q Querier, workspace, env, id string) (*starflowtype.WorkerJob, error) {
	notFound := fmt.Errorf("job %s: %w", id, starflowtype.ErrNotFound)
	cid, ok := CanonicalID(id)
	if !ok {
		return nil, notFound
	}
	j, err := scanJob(q.QueryRow(ctx, "get_job", cid, workspace, env))
	if isNoRows(err) {
		return nil, notFound
	}
	return j, err
}

// fencedJob reads job id for a fenced call with token and, when lockRun,
// locks its run first (the lock order of every wake). A job another call
// cannot act on with token is ErrLeaseLost, saying why.
func (t *txn) fencedJob(ctx context.Context, workspace, env, id, token string, lockRun bool) (*starflowtype.WorkerJob, error) {
	j, err := t.s.getJob(ctx, t.tx, workspace, env, id)
	if err != nil {
		return nil, err
	}
	if lockRun {
		var ws, env string
		var attempt int
		if err := t.tx.QueryRow(ctx, "lock_run", j.RunID).Scan(&ws, &env, &attempt); err != nil {
			return nil, fmt.Errorf("lock run %s: %w", j.RunID, err)
		}
		if j, err = t.s.getJob(ctx, t.tx, workspace, env, id); err != nil { // as of the lock
			return nil, err
		}
	}
	var now time.Time
	if err := t.tx.QueryRow(ctx, "now").Scan(&now); err != nil {
		return nil, err
	}
	switch {
	case j.Status != starflowtype.JobRunning:
		return nil, fmt.Errorf("job %s is %s, not running: %w", j.ID, j.Status, starflowtype.ErrLeaseLost)
	case token == "" || j.LeaseToken != token:
		return nil, fmt.Errorf("job %s: the fencing token is not the current claim's (try %d, held by %s): %w", j.ID, j.Tries, j.LeasedBy, starflowtype.ErrLeaseLost)
	case j.LeaseUntil.Before(now):
		return nil, fmt.Errorf("job %s: the lease expired at %s: %w", j.ID, j.LeaseUntil.UTC().Format(time.RFC3339Nano), starflowtype.ErrLeaseLost)
	}
	return j, nil
}

// fenced runs a fenced update of job j that RETURNs it; no row means the
// fence moved between the read and the update (ErrLeaseLost).
func (t *txn) fenced(ctx context.Context, j *starflowtype.WorkerJob, name string, args ...any) (*starflowtype.WorkerJob, error) {
	out, err := scanJob(t.tx.QueryRow(ctx, name, args...))
	if isNoRows(err) {
		return nil, fmt.Errorf("job %s: the lease is no longer held: %w", j.ID, starflowtype.ErrLeaseLost)
	}
	return out, err
}

// HeartbeatJob implements state.Jobs.
func (s *Store) HeartbeatJob(ctx context.Context, p *state.HeartbeatJobParams) (*starflowtype.WorkerJob, error) {
	var out *starflowtype.WorkerJob
	_, err := s.write(ctx, state.OpHeartbeatJob, "", false, func(t *txn) error {
		j, err := t.fencedJob(ctx, p.WorkspaceID, p.Env, p.ID, p.Token, false)
		if err != nil {
			return err
		}
		out, err = t.fenced(ctx, j, "heartbeat_job", j.ID, p.Token, j.HeartbeatTimeout)
		return err
	})
	if err != nil {
		return nil, s.errorf("heartbeat job: %w", err)
	}
	return out, nil
}

// CompleteJob implements state.Jobs.
func (s *Store) CompleteJob(ctx context.Context, p *state.CompleteJobParams) (*starflowtype.WorkerJob, error) {
	output := p.Output
	if len(output) == 0 {
		output = json.RawMessage("null")
	}
	if !json.Valid(output) {
		return nil, s.errorf("complete job %s: %w", p.ID, starflowtype.Invalid(errors.New("the output is not valid JSON")))
	}
	var out *starflowtype.WorkerJob
	_, err := s.write(ctx, state.OpCompleteJob, "", false, func(t *txn) error {
		j, err := t.fencedJob(ctx, p.WorkspaceID, p.Env, p.ID, p.Token, true)
		if err != nil {
			return err
		}
		if out, err = t.fenced(ctx, j, "complete_job", j.ID, p.Token, string(output)); err != nil {
			return err
		}
		return t.endJob(ctx, out, state.JobPayload(output, nil))
	})
	if err != nil {
		return nil, s.errorf("complete job: %w", err)
	}
	return out, nil
}

// FailJob implements state.Jobs.
func (s *Store) FailJob(ctx context.Context, p *state.FailJobParams) (*starflowtype.WorkerJob, error) {
	info := p.Error
	if info.Type == "" {
		info.Type = starflowtype.ErrorUntyped
	}
	infoJSON, err := json.Marshal(&info)
	if err != nil {
		return nil, s.errorf("fail job %s: %w", p.ID, starflowtype.Invalid(fmt.Errorf("the error: %w", err)))
	}
	var out *starflowtype.WorkerJob
	_, err = s.write(ctx, state.OpFailJob, "", false, func(t *txn) error {
		j, err := t.fencedJob(ctx, p.WorkspaceID, p.Env, p.ID, p.Token, true)
		if err != nil {
			return err
		}
		retry, delay := p.Retry && j.Tries < j.MaxTries, time.Duration(0)
		if retry {
			delay = jobDelay(j)
		}
		if out, err = t.fenced(ctx, j, "fail_job", j.ID, p.Token, info.Message, string(infoJSON), retry, delay); err != nil {
			return err
		}
		if retry {
			return nil
		}
		return t.endJob(ctx, out, state.JobPayload(nil, &info))
	})
	if err != nil {
		return nil, s.errorf("fail job: %w", err)
	}
	return out, nil
}

// AbandonJob implements state.Jobs.
func (s *Store) AbandonJob(ctx context.Context, p *state.AbandonJobParams) error {
	_, err := s.write(ctx, state.OpAbandonJob, p.RunID, false, func(t *txn) error {
		m, err := t.fence(ctx, p.RunID, p.Lease)
		if err != nil {
			return err
		}
		// Written (and hooked) even when no job was left to cancel: the
		// fence touched the run row, and a hook's refusal must undo it.
		_, err = t.tx.Exec(ctx, "abandon_job", m.id, p.Attempt, p.ScopePath, p.StepID)
		return err
	})
	if err != nil {
		return s.errorf("abandon job of %s: %w", p.StepID, err)
	}
	return nil
}

// ExpireJobLeases implements state.Jobs: one transaction per job; a job
// whose lease a heartbeat extended meanwhile is skipped.
func (s *Store) ExpireJobLeases(ctx context.Context, p *state.ExpireJobLeasesParams) ([]*starflowtype.WorkerJob, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 500
	}
	ids, err := queryStrings(ctx, s.reader(), "expired_jobs", limit)
	if err != nil {
		return nil, s.errorf("expire job leases: %w", err)
	}
	var out []*starflowtype.WorkerJob
	for _, id := range ids {
		var changed *starflowtype.WorkerJob
		_, err := s.write(ctx, state.OpExpireJobLeases, "", false, func(t *txn) error {
			changed = nil
			j, err := t.s.getJob(ctx, t.tx, "", "", id)
			if err != nil {
				return err
			}
			var ws, env string
			var attempt int
			if err := t.tx.QueryRow(ctx, "lock_run", j.RunID).Scan(&ws, &env, &attempt); err != nil {
				return fmt.Errorf("lock run %s: %w", j.RunID, err)
			}
			var policy state.JobRetry
			_ = json.Unmarshal(j.Retry, &policy) // written by insertJob; a zero policy retries nothing
			retry, delay := policy.RetryExpired && j.Tries < j.MaxTries, time.Duration(0)
			if retry {
				delay = jobDelay(j)
			}
			info := starflowtype.ErrorInfo{Type: starflowtype.ErrorTimeout, Message: fmt.Sprintf(
				"job %s (type %s) of step %s: worker %s sent no heartbeat within %s (try %d of %d)",
				j.ID, j.Type, j.StepID, j.LeasedBy, j.HeartbeatTimeout, j.Tries, j.MaxTries)}
			infoJSON, _ := json.Marshal(&info)
			c, err := scanJob(t.tx.QueryRow(ctx, "expire_job", j.ID, info.Message, string(infoJSON), retry, delay))
			if isNoRows(err) {
				t.idle = true // heartbeated or ended meanwhile
				return nil
			}
			if err != nil {
				return err
			}
			changed = c
			if retry {
				return nil
			}
			return t.endJob(ctx, c, state.JobPayload(nil, &info))
		})
		if err != nil {
			return out, s.errorf("expire job lease %s: %w", id, err)
		}
		if changed != nil {
			out = append(out, changed)
		}
	}
	return out, nil
}

// endJob wakes the wait of job j, which just ended, with payload. A wait
// already closed (the run ended or its attempt was interrupted while the
// worker finished) is a lost lease: the job's end is not applied.
func (t *txn) endJob(ctx context.Context, j *starflowtype.WorkerJob, payload json.RawMessage) error {
	w, err := scanWait(t.tx.QueryRow(ctx, "get_wait", j.ID))
	if err != nil {
		return fmt.Errorf("job %s: read its wait: %w", j.ID, err)
	}
	t.ch.RunID = w.RunID
	if err := t.wake(ctx, w, starflowtype.WaitWoken, payload, "job", false); err != nil {
		if errors.Is(err, starflowtype.ErrWaitClosed) {
			return fmt.Errorf("job %s: its step no longer waits for it (%w): %w", j.ID, err, starflowtype.ErrLeaseLost)
		}
		return err
	}
	_, err = t.waitChanged(ctx, w.ID)
	return err
}

// jobDelay is how long job j, whose try j.Tries just failed, waits before
// it may be claimed again: its retry policy's delay for that try.
func jobDelay(j *starflowtype.WorkerJob) time.Duration {
	var p state.JobRetry
	if err := json.Unmarshal(j.Retry, &p); err != nil {
		return 0
	}
	return backoff.Jittered(p.Jitter, time.Duration(p.InitialMS)*time.Millisecond, time.Duration(p.MaxMS)*time.Millisecond, p.Backoff, max(j.Tries, 1))
}

// JobPollers implements state.Jobs.
func (s *Store) JobPollers(ctx context.Context, p *state.JobPollersParams) ([]*starflowtype.JobPoller, error) {
	since := p.Since
	if since <= 0 {
		since = time.Minute
	}
	rows, err := s.reader().Query(ctx, "job_pollers", orDefault(p.WorkspaceID, state.DefaultWorkspace), orEmpty(p.Types), -since)
	if err != nil {
		return nil, s.errorf("job pollers: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.JobPoller
	for rows.Next() {
		var jp starflowtype.JobPoller
		if err := rows.Scan(&jp.WorkspaceID, &jp.Type, &jp.Worker, &jp.LastPollAt); err != nil {
			return nil, s.errorf("job pollers: %w", err)
		}
		out = append(out, &jp)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("job pollers: %w", err)
	}
	return out, nil
}

// scanJob reads a worker_jobs row (_job_columns).
func scanJob(row Row) (*starflowtype.WorkerJob, error) {
	var j starflowtype.WorkerJob
	var status string
	var heartbeatMS int64
	err := row.Scan(&j.ID, &j.WorkspaceID, &j.RunID, &j.Attempt, &j.ScopePath, &j.StepID, &j.Type, &status,
		&j.LeasedBy, &j.LeaseUntil, &j.LeaseEpoch, &j.LeaseToken, &j.Tries, &j.MaxTries,
		&heartbeatMS, &j.Retry, &j.AvailableAt, &j.IdempotencyKey, &j.Input, &j.Output,
		&j.Error, &j.ErrorDetail, &j.CreatedAt, &j.UpdatedAt)
	if err != nil {
		return nil, err
	}
	j.Status = starflowtype.JobStatus(status)
	j.HeartbeatTimeout = time.Duration(heartbeatMS) * time.Millisecond
	return &j, nil
}
