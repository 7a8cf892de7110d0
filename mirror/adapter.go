package mirror

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

var _ state.Adapter = (*Adapter)(nil)

// after runs after every successful write: a nudge to the drainer (outbox
// mode) or a best-effort warm write (direct mode), and a background
// reconciliation of every run the write ended.
func (m *Adapter) after(runs []*starflowtype.Run, steps ...*warm.StepEntry) {
	if m.drainer != nil {
		m.drainer.Nudge()
	} else {
		m.direct.write(runs, steps)
	}
	for _, r := range runs {
		if r != nil && r.Status.Terminal() {
			m.reconcile(r.ID)
		}
	}
}

// reconcile starts the end-of-run reconciliation of runID in the
// background, unless Config.MaxReconciles are in flight (the sweep covers
// the run then) or the Adapter is closing.
func (m *Adapter) reconcile(runID string) {
	if m.sweeper == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return
	}
	select {
	case m.sem <- struct{}{}:
	default:
		m.metrics.Reconciles.WithLabelValues(reasonSkipped).Inc()
		return
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer func() { <-m.sem }()
		ctx, cancel := context.WithTimeout(context.Background(), m.cfg.ReconcileWait+2*m.cfg.ApplyTimeout)
		defer cancel()
		go func() {
			select {
			case <-m.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		reason, err := m.sweeper.Reconcile(ctx, runID)
		switch {
		case err != nil:
			m.metrics.Reconciles.WithLabelValues(reasonSkipped).Inc()
			m.cfg.Logger.Warn("mirror: end-of-run reconciliation", "run_id", runID, "err", err)
		case reason == "":
			m.metrics.Reconciles.WithLabelValues("ok").Inc()
		case reason == reasonSkipped:
			m.metrics.Reconciles.WithLabelValues(reasonSkipped).Inc()
		default:
			m.metrics.Reconciles.WithLabelValues("corrected").Inc()
		}
	}()
}

func stepOf(k state.StepKey, kind string, status starflowtype.StepStatus, tries int, errMsg string) *warm.StepEntry {
	return &warm.StepEntry{RunID: k.RunID, Attempt: k.Attempt, ScopePath: k.ScopePath, StepID: k.StepID,
		Kind: kind, Status: string(status), Tries: tries, Error: errMsg, UpdatedAt: time.Now().UTC()}
}

// EnqueueRun implements state.Adapter.
func (m *Adapter) EnqueueRun(ctx context.Context, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.EnqueueRun(ctx, p)
	if err == nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// ClaimRun implements state.Adapter.
func (m *Adapter) ClaimRun(ctx context.Context, p *state.ClaimRunParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.ClaimRun(ctx, p)
	if err == nil && r != nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// ClaimRuns implements state.Adapter.
func (m *Adapter) ClaimRuns(ctx context.Context, p *state.ClaimRunParams) ([]*starflowtype.Run, error) {
	runs, err := m.Adapter.ClaimRuns(ctx, p)
	if err == nil && len(runs) > 0 {
		m.after(runs)
	}
	return runs, err
}

// OnRunStart implements state.Adapter.
func (m *Adapter) OnRunStart(ctx context.Context, p *state.RunStartParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.OnRunStart(ctx, p)
	if err == nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// OnNodeStart implements state.Adapter.
func (m *Adapter) OnNodeStart(ctx context.Context, p *state.NodeStartParams) error {
	err := m.Adapter.OnNodeStart(ctx, p)
	if err == nil {
		m.after(nil, stepOf(p.StepKey, p.Kind, starflowtype.StepRunning, p.Try, ""))
	}
	return err
}

// OnNodeRetry implements state.Adapter.
func (m *Adapter) OnNodeRetry(ctx context.Context, p *state.NodeRetryParams) error {
	err := m.Adapter.OnNodeRetry(ctx, p)
	if err == nil {
		m.after(nil, stepOf(p.StepKey, "", starflowtype.StepRunning, p.Try, p.Error))
	}
	return err
}

// OnNodeComplete implements state.Adapter.
func (m *Adapter) OnNodeComplete(ctx context.Context, p *state.NodeCompleteParams) error {
	err := m.Adapter.OnNodeComplete(ctx, p)
	if err == nil {
		m.after(nil, stepOf(p.StepKey, "", starflowtype.StepSucceeded, p.Try, ""))
	}
	return err
}

// OnNodeError implements state.Adapter.
func (m *Adapter) OnNodeError(ctx context.Context, p *state.NodeErrorParams) error {
	err := m.Adapter.OnNodeError(ctx, p)
	if err == nil {
		status := starflowtype.StepFailed
		if p.Cancelled {
			status = starflowtype.StepCancelled
		}
		m.after(nil, stepOf(p.StepKey, p.Kind, status, p.Try, p.Error))
	}
	return err
}

// OnNodeSkipped implements state.Adapter.
func (m *Adapter) OnNodeSkipped(ctx context.Context, p *state.NodeSkippedParams) error {
	err := m.Adapter.OnNodeSkipped(ctx, p)
	if err == nil {
		m.after(nil, stepOf(p.StepKey, p.Kind, starflowtype.StepSkipped, 0, ""))
	}
	return err
}

// RecordPhaseIfChanged implements state.Adapter.
func (m *Adapter) RecordPhaseIfChanged(ctx context.Context, p *state.RecordPhaseParams) error {
	err := m.Adapter.RecordPhaseIfChanged(ctx, p)
	if err == nil {
		m.after(nil)
	}
	return err
}

// OnRunComplete implements state.Adapter; the run is then reconciled in
// the background.
func (m *Adapter) OnRunComplete(ctx context.Context, p *state.RunCompleteParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.OnRunComplete(ctx, p)
	if err == nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// OnRunError implements state.Adapter; a run that failed is then
// reconciled in the background.
func (m *Adapter) OnRunError(ctx context.Context, p *state.RunErrorParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.OnRunError(ctx, p)
	if err == nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// OnRunCancelled implements state.Adapter; the run is then reconciled in
// the background.
func (m *Adapter) OnRunCancelled(ctx context.Context, p *state.RunCancelledParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.OnRunCancelled(ctx, p)
	if err == nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// ClearLease implements state.Adapter.
func (m *Adapter) ClearLease(ctx context.Context, p *state.ClearLeaseParams) error {
	err := m.Adapter.ClearLease(ctx, p)
	if err == nil {
		m.after(nil)
	}
	return err
}

// ExpireOldLeases implements state.Adapter.
func (m *Adapter) ExpireOldLeases(ctx context.Context, p *state.ExpireOldLeasesParams) ([]*starflowtype.Run, error) {
	rs, err := m.Adapter.ExpireOldLeases(ctx, p)
	if err == nil && len(rs) > 0 {
		m.after(rs)
	}
	return rs, err
}

// CancelRun implements state.Adapter.
func (m *Adapter) CancelRun(ctx context.Context, p *state.CancelRunParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.CancelRun(ctx, p)
	if err == nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// RequeueRun implements state.Adapter.
func (m *Adapter) RequeueRun(ctx context.Context, p *state.RequeueRunParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.RequeueRun(ctx, p)
	if err == nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// OnRunPaused implements state.Waiter.
func (m *Adapter) OnRunPaused(ctx context.Context, p *state.RunPausedParams) error {
	err := m.Adapter.OnRunPaused(ctx, p)
	if err == nil {
		m.after(nil, stepOf(p.StepKey, p.Kind, starflowtype.StepWaiting, 0, ""))
	}
	return err
}

// RegisterWait implements state.Waiter.
func (m *Adapter) RegisterWait(ctx context.Context, p *state.RegisterWaitParams) (*starflowtype.Wait, error) {
	w, err := m.Adapter.RegisterWait(ctx, p)
	if err == nil {
		m.after(nil)
	}
	return w, err
}

// ParkRun implements state.Waiter.
func (m *Adapter) ParkRun(ctx context.Context, p *state.ParkRunParams) (*starflowtype.Run, error) {
	r, err := m.Adapter.ParkRun(ctx, p)
	if err == nil {
		m.after([]*starflowtype.Run{r})
	}
	return r, err
}

// WakeWait implements state.Waiter.
func (m *Adapter) WakeWait(ctx context.Context, p *state.WakeWaitParams) (*starflowtype.Wait, error) {
	w, err := m.Adapter.WakeWait(ctx, p)
	if err == nil {
		m.after(nil)
	}
	return w, err
}

// Signal implements state.Waiter.
func (m *Adapter) Signal(ctx context.Context, p *state.SignalParams) (*state.SignalResult, error) {
	r, err := m.Adapter.Signal(ctx, p)
	if err == nil {
		m.after(nil)
	}
	return r, err
}

// FireDueWaits implements state.Waiter.
func (m *Adapter) FireDueWaits(ctx context.Context, p *state.FireDueWaitsParams) ([]*starflowtype.Wait, error) {
	ws, err := m.Adapter.FireDueWaits(ctx, p)
	if err == nil && len(ws) > 0 {
		m.after(nil)
	}
	return ws, err
}

// SessionSet implements state.Waiter.
func (m *Adapter) SessionSet(ctx context.Context, p *state.SessionSetParams) (*starflowtype.SessionVar, error) {
	v, err := m.Adapter.SessionSet(ctx, p)
	if err == nil {
		m.after(nil)
		if m.direct != nil && v != nil {
			m.direct.sessionVar(v)
		}
	}
	return v, err
}

// DeleteExpiredSessionVars implements state.Waiter.
func (m *Adapter) DeleteExpiredSessionVars(ctx context.Context, p *state.DeleteExpiredSessionVarsParams) (int64, error) {
	n, err := m.Adapter.DeleteExpiredSessionVars(ctx, p)
	if err == nil && n > 0 {
		m.after(nil)
	}
	return n, err
}

// direct writes to the warm store after each write of a non-durable cold
// adapter, best effort: errors are logged and dropped.
type direct struct {
	warm    warm.Store
	log     *slog.Logger
	version atomic.Int64
}

func (d *direct) write(runs []*starflowtype.Run, steps []*warm.StepEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), directWriteTimeoutDef)
	defer cancel()
	for _, s := range steps {
		if err := d.warm.PutStep(ctx, s); err != nil {
			d.log.Warn("mirror: direct warm write", "run_id", s.RunID, "err", err)
		}
	}
	for _, r := range runs {
		if r == nil {
			continue
		}
		// A version from the wall clock: monotonic across restarts of the
		// process, which keeps nothing else.
		var v int64
		for {
			old := d.version.Load()
			v = max(time.Now().UnixNano(), old+1)
			if d.version.CompareAndSwap(old, v) {
				break
			}
		}
		if _, err := d.warm.PutRun(ctx, RunEntry(r, nil, v), false); err != nil {
			d.log.Warn("mirror: direct warm write", "run_id", r.ID, "err", err)
		}
	}
}

func (d *direct) sessionVar(v *starflowtype.SessionVar) {
	ctx, cancel := context.WithTimeout(context.Background(), directWriteTimeoutDef)
	defer cancel()
	val := v.Value
	if val == nil {
		val = []byte("null")
	}
	if err := d.warm.PutSessionVar(ctx, v.WorkspaceID, v.SessionID, v.Key, val); err != nil {
		d.log.Warn("mirror: direct warm write", "session", v.SessionID, "key", v.Key, "err", err)
	}
}
