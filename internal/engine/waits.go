package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// Durable waits in the engine (SPEC §6, seed 000 "The wait/wake ordering
// invariant").
//
// A `wait` or `workflow_call` step instance first looks for its
// workflow_waits row of the current attempt. A woken or timed-out row
// completes the step with the wake payload (continuePausedWaitNode: the
// run was claimed again and its checkpoints restored). Otherwise the
// instance enters the wait (enterDurableWait), in this order, each write a
// commit boundary:
//
//  1. variables.__celestialWait is set (in the snapshot) and OnRunPaused
//     writes status paused, the step row waiting, the full masked context
//     as checkpoint_json, and run_paused;
//  2. for workflow_call, the child run is enqueued (its id derived from the
//     parent's run, scope and step, not the attempt: a re-entered wait or a
//     later attempt re-attaches to the child already started and never
//     starts a second one; its end reaches the new wait through the inbox,
//     or RegisterWait reads it from the child's row);
//  3. RegisterWait writes the wait row, with the token hash, in the same
//     transaction consuming a matching early wake from the inbox;
//  4. only then is the token delivered (notify);
//
// and the step returns errParked. Other lanes, items and graph branches
// run on until they end or park too; then Execute calls ParkRun once
// (commit boundary 3 of state.Waiter): the lease is released and the run
// is parked, or queued at once when one of its waits is already woken.

// errParked is how a step instance that entered a durable wait stops the
// steps lists around it: nothing is recorded failed or skipped for it, no
// catch or finally runs, and the run is parked.
var errParked = errors.New("the run is parked at a durable wait")

// realStop reports whether err stops the whole run (lease lost, shutdown,
// operator cancel): it wins over a failure, which wins over parking.
func (rs *runState) realStop(err error) bool {
	return rs.stopping(err) && !errors.Is(err, errParked)
}

// errRank orders the errors of concurrent children: the run stopping,
// then a failure, then parking.
func (rs *runState) errRank(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errParked) && !rs.realStop(err):
		return 1
	case rs.realStop(err):
		return 3
	}
	return 2
}

// hook calls the test hook and the faultpoint of a commit boundary.
func (rs *runState) hook(point string, key state.StepKey) {
	faultpoint.Hit(point)
	if h := rs.e.cfg.WaitHook; h != nil {
		h(point, key)
	}
}

// execWait runs (or continues) a wait or workflow_call step instance.
func (rs *runState) execWait(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	key := rs.led.key(f.scope, s.ID)
	w, err := rs.e.cfg.Store.GetWait(rs.root, &state.GetWaitParams{StepKey: key})
	if err != nil && !errors.Is(err, starflowtype.ErrNotFound) {
		return nil, fmt.Errorf("step %s: read its wait: %w", s.ID, err)
	}
	if w != nil {
		switch w.Status {
		case starflowtype.WaitWoken, starflowtype.WaitTimedOut:
			return rs.finishWait(ctx, f, s, w)
		case starflowtype.WaitCancelled:
			try := max(rs.openTry(f.scope, s.ID), 1)
			return nil, rs.fail(f, s, try, typed(starflowtype.ErrorCancelled, fmt.Errorf("wait %s was cancelled", w.ID)))
		}
	}
	return nil, rs.enterDurableWait(ctx, f, s, w)
}

// finishWait completes a woken wait: its payload is the step's output (for
// workflow_call: the child's output, or the child's error fails the step).
func (rs *runState) finishWait(ctx context.Context, f *frame, s *workflow.Step, w *starflowtype.Wait) (any, error) {
	// The instance is re-entered: its row is waiting since it entered the
	// wait (tries.go), so no node_start is written for it.
	try, err := rs.enter(f.scope, s.ID, s.Kind())
	if err != nil {
		return nil, err
	}
	var payload any
	if len(w.Payload) > 0 {
		var err error
		if payload, err = jsonvalue.Decode(w.Payload); err != nil {
			return nil, rs.fail(f, s, try, step.Permanent(fmt.Errorf("wake payload of wait %s: %w", w.ID, err)))
		}
	}
	if w.Status == starflowtype.WaitTimedOut && s.Job == nil {
		payload = map[string]any{"timed_out": true}
	}
	if s.Job != nil {
		if payload, err = jobResult(s, w, payload); err != nil {
			return nil, rs.fail(f, s, try, err)
		}
	}
	if s.WorkflowCall != nil {
		m, _ := payload.(map[string]any)
		status, _ := m["status"].(string)
		if status != string(starflowtype.RunSucceeded) {
			return nil, rs.fail(f, s, try, rs.childFailed(s.WorkflowCall.Workflow, status, m))
		}
		payload = m["output"]
	}
	out, err := rs.shapeOutput(ctx, f, s, payload)
	if err != nil {
		return nil, rs.fail(f, s, try, err)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(rs.root), releaseTimeout)
	defer cancel()
	if err := rs.complete(wctx, f, s, try, false, out, nil); err != nil {
		var bad unencodable
		if errors.As(err, &bad) {
			return nil, rs.fail(f, s, try, err)
		}
		return nil, err
	}
	return out, nil
}

// childFailed is the failure of a workflow_call whose child run did not
// succeed: type child_failed, its cause the child's own typed error (from
// the end payload's error_detail; a child without one — cancelled, or
// ended before typed errors — gets a cause of type cancelled or error
// with the child's message). The child's message and the chain of causes
// are bounded (causes.go), so errors stay small down a deep tree; both
// are scrubbed of this run's secrets before they are cut, so a cut
// through a secret leaves no half of it behind.
func (rs *runState) childFailed(workflowName, status string, m map[string]any) error {
	msg, _ := m["error"].(string)
	if msg == "" {
		msg = "no error message"
	}
	msg = elide(rs.led.red.String(msg), maxChildMessage)
	err := step.Permanent(fmt.Errorf("child run %v of workflow %s ended %s: %s", m["run_id"], workflowName, orUnknown(status), msg))
	var cause *starflowtype.ErrorInfo
	if detail, ok := m["error_detail"].(map[string]any); ok {
		cause = mapInfo(detail) // decoded JSON: numbers keep their type
		if cause != nil {
			cause = rs.scrubInfo(cause)
		}
	}
	if cause == nil {
		typ := starflowtype.ErrorUntyped
		if status == string(starflowtype.RunCancelled) {
			typ = starflowtype.ErrorCancelled
		}
		cause = &starflowtype.ErrorInfo{Type: typ, Message: msg}
	}
	info := starflowtype.ErrorInfo{Type: starflowtype.ErrorChildFailed, Cause: cause}
	capCauses(&info)
	return &typedError{info: info, err: err}
}

func orUnknown(s string) string {
	if s == "" {
		return "in an unknown state"
	}
	return s
}

// waitPlan is a wait rendered, before anything is written.
type waitPlan struct {
	kind           starflowtype.WaitKind
	signal         string
	correlationKey string
	wakeIn         time.Duration
	wakeAt         time.Time
	timeout        time.Duration
	notify         *notifyRequest // unscrubbed
	form           any            // an approval's rendered form (unscrubbed); nil when none
	child          *state.EnqueueRunParams
	job            *state.JobSpec // input not yet scrubbed: jobInput
	jobInput       any
}

// enterDurableWait enters the wait of step s (see the package comment
// above). w is the instance's pending wait row when it has one already (a
// run claimed again before it was parked): then only the pause is written
// again.
func (rs *runState) enterDurableWait(ctx context.Context, f *frame, s *workflow.Step, w *starflowtype.Wait) error {
	scope, kind := f.scope, s.Kind()
	key := rs.led.key(scope, s.ID)
	// A wait re-entered (its row still open: the run was claimed again
	// before it was parked) writes no second node_start (tries.go).
	try, err := rs.enter(scope, s.ID, kind)
	if err != nil {
		return err
	}
	var plan *waitPlan
	if w == nil {
		if plan, err = rs.planWait(ctx, f, s); err != nil {
			return rs.fail(f, s, try, err)
		}
	}
	// The writes of a wait are not cut off by a shutdown or an enclosing
	// timeout: the pause must reach a boundary. The fence still refuses
	// them when the lease was lost.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(rs.root), 2*releaseTimeout)
	defer cancel()

	// 1. __celestialWait, paused, the step waiting, the snapshot.
	envelope := map[string]any{"status": "pending", "kind": kind, "scope_path": scope, "step_id": s.ID}
	if plan != nil {
		envelope["wait_kind"], envelope["signal"] = string(plan.kind), plan.signal
		if plan.correlationKey != "" {
			envelope["correlation_key"] = plan.correlationKey
		}
	} else {
		envelope["wait_id"], envelope["wait_kind"], envelope["signal"] = w.ID, string(w.Kind), w.Signal
	}
	snap, err := rs.led.json(rs.snapshot(f, envelope))
	if err != nil {
		return rs.fail(f, s, try, err)
	}
	extra, _ := rs.led.json(map[string]any{"scope_path": scope, "step_id": s.ID, "kind": kind})
	if err := rs.e.cfg.Store.OnRunPaused(wctx, &state.RunPausedParams{StepKey: key, Lease: rs.led.lease, Kind: kind,
		Snapshot: snap, Payload: extra}); err != nil {
		return fmt.Errorf("step %s: pause: %w", s.ID, err)
	}
	rs.hook(WaitAfterPaused, key)
	rs.mu.Lock()
	rs.waiting = append(rs.waiting, waitingStep{scope: scope, stepID: s.ID, kind: kind, try: try})
	rs.mu.Unlock()
	if w != nil {
		return errParked // registered before; notify is the maintenance pass's
	}

	// 2. The child run, before the wait that its end wakes.
	if plan.child != nil {
		child, err := rs.enqueueChild(withSpan(wctx, ctx), plan.child)
		if err != nil {
			return fmt.Errorf("step %s: start child run: %w", s.ID, err)
		}
		plan.correlationKey = child.ID
	}

	// 3. The wait row (and the token's hash).
	p := &state.RegisterWaitParams{StepKey: key, Lease: rs.led.lease, ID: uuid.NewString(), WorkspaceID: rs.run.WorkspaceID,
		Kind: plan.kind, Signal: plan.signal, CorrelationKey: plan.correlationKey, WakeIn: plan.wakeIn, WakeAt: plan.wakeAt,
		ExpiresIn: plan.timeout, NotifyGrace: notifyGrace, Job: plan.job}
	if plan.job != nil {
		if plan.job.Input, err = rs.scrubbed("job.input", plan.jobInput); err != nil {
			return rs.fail(f, s, try, err)
		}
	}
	var token string
	if plan.notify != nil {
		k, err := rs.signingKey(wctx)
		if err != nil {
			return fmt.Errorf("step %s: %w", s.ID, err)
		}
		ttl := rs.e.cfg.WakeTokenTTL
		if plan.timeout > 0 {
			ttl = plan.timeout
		}
		plan.notify.ExpiresAt = rs.e.cfg.Now().Add(ttl).Truncate(time.Second).UTC()
		token = waketoken.Sign(k, rs.run.ID, p.ID, plan.notify.ExpiresAt)
		p.TokenHash, p.KeyID = waketoken.Hash(token), k.ID
		// Stored scrubbed; the inline delivery below sends the
		// unscrubbed one.
		if p.Notify, err = rs.scrubbed("wait.notify", plan.notify); err != nil {
			return rs.fail(f, s, try, err)
		}
	}
	if plan.form != nil {
		if p.Form, err = rs.scrubbed("wait.approval.form", plan.form); err != nil {
			return rs.fail(f, s, try, err)
		}
	}
	reg, err := rs.e.cfg.Store.RegisterWait(wctx, p)
	if err != nil {
		return fmt.Errorf("step %s: register wait: %w", s.ID, err)
	}
	rs.hook(WaitAfterRegister, key)
	rs.log.Info("step waiting", "step", s.ID, "scope_path", scope, "wait_id", reg.ID, "wait_kind", reg.Kind, "signal", reg.Signal, "status", reg.Status)

	// 4. The token goes out only now, and only for the row just written.
	if plan.notify != nil && reg.ID == p.ID && reg.Status == starflowtype.WaitPending {
		rs.hook(WaitBeforeNotify, key)
		if err := rs.e.notifyInline(withSpan(wctx, ctx), reg, plan.notify, token); err != nil {
			rs.log.Warn("notify not delivered; the maintenance pass retries it", "step", s.ID, "wait_id", reg.ID, "error", rs.led.red.Error(err))
		}
	}
	return errParked
}

// scrubbed is v as stored JSON, secrets scrubbed: encoded, decoded as a
// plain value (so the redactor sees every string, whatever Go type held
// it) and encoded by the ledger; an error fails the step.
func (rs *runState) scrubbed(what string, v any) (json.RawMessage, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("%s: %w", what, err))
	}
	plain, err := jsonvalue.Decode(b)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("%s: %w", what, err))
	}
	return rs.led.json(plain)
}

// waitingStep is a step instance that entered a durable wait, at try.
type waitingStep struct {
	scope, stepID, kind string
	try                 int
}

// closeWaiting records as failed the step instances inside list (run in
// scope) that entered a wait during this execution: a try around them
// caught a sibling's failure, so the run goes on without them. Their step
// rows must not stay waiting — a later wake of their wait would otherwise
// make ParkRun re-queue the run for a step that never runs again.
//
// A race closes the waits of the lanes that lost it the same way, recorded
// cancelled (why says so).
func (rs *runState) closeWaiting(scope string, list []*workflow.Step, why error) error {
	inside := map[string]bool{}
	var walk func([]*workflow.Step)
	walk = func(l []*workflow.Step) {
		for _, s := range l {
			inside[s.ID] = true
			for _, c := range s.Children() {
				walk(c)
			}
		}
	}
	walk(list)
	rs.mu.Lock()
	var closing []waitingStep
	kept := rs.waiting[:0]
	for _, w := range rs.waiting {
		below := scope == "" || w.scope == scope || strings.HasPrefix(w.scope, scope+"/")
		if below && inside[w.stepID] {
			closing = append(closing, w)
		} else {
			kept = append(kept, w)
		}
	}
	rs.waiting = kept
	rs.mu.Unlock()
	var lost *raceLost
	cancelled := errors.As(why, &lost)
	for _, w := range closing {
		if werr := rs.giveUp(w.scope, w.stepID, w.kind, w.try, why, cancelled); werr != nil {
			return werr
		}
	}
	return nil
}

// giveUp records a step instance that entered a wait as failed (or
// cancelled) because the run goes on without it, and cancels its job
// when it is a job step: no worker should do the job of a step given up.
func (rs *runState) giveUp(scope, stepID, kind string, try int, why error, cancelled bool) error {
	if err := rs.led.nodeError(rs.root, scope, stepID, kind, try, why, cancelled, nil); err != nil {
		return err
	}
	if kind != "job" {
		return nil
	}
	return rs.e.cfg.Store.AbandonJob(rs.root, &state.AbandonJobParams{StepKey: rs.led.key(scope, stepID), Lease: rs.led.lease})
}

// signingKey is the first key of the ring.
func (rs *runState) signingKey(ctx context.Context) (waketoken.Key, error) {
	keys, err := rs.e.wakeKeys(ctx, false, true)
	if err != nil {
		return waketoken.Key{}, err
	}
	if len(keys) == 0 {
		return waketoken.Key{}, starflowtype.ErrNoWakeKeys
	}
	return keys[0], nil
}

// snapshot is the full context of frame f as a paused run's
// checkpoint_json: what expressions see (secrets and env left out), with
// variables.__celestialWait set to the wait's envelope.
func (rs *runState) snapshot(f *frame, envelope map[string]any) map[string]any {
	out := make(map[string]any, len(f.vals)+1)
	for k, v := range f.vals {
		if k == "secrets" || k == "env" {
			continue
		}
		out[k] = v
	}
	vars := make(map[string]any, len(f.vars)+1)
	for k, v := range f.vars {
		vars[k] = v
	}
	vars[reservedPrefix+"Wait"] = envelope
	out["variables"] = vars
	out["scope_path"] = f.scope
	return out
}

// planWait renders what the wait needs (errors are the step's permanent
// failure; nothing is written yet).
func (rs *runState) planWait(ctx context.Context, f *frame, s *workflow.Step) (*waitPlan, error) {
	if c := s.WorkflowCall; c != nil {
		p, err := rs.childParams(ctx, f, s)
		if err != nil {
			return nil, err
		}
		return &waitPlan{kind: starflowtype.WaitChild, signal: starflowtype.ChildSignal, child: p}, nil
	}
	if s.Job != nil {
		return rs.planJob(ctx, f, s)
	}
	w := s.Wait
	plan := &waitPlan{signal: w.SignalName(s.ID), timeout: time.Duration(w.Timeout)}
	switch w.Kind() {
	case "approval":
		plan.kind = starflowtype.WaitApproval
	case "timer":
		plan.kind = starflowtype.WaitTimer
	default:
		plan.kind = starflowtype.WaitSignal
	}
	if w.CorrelationKey != nil {
		v, err := rs.render(ctx, f, "wait.correlation_key", w.CorrelationKey)
		if err != nil {
			return nil, err
		}
		if plan.correlationKey, err = asString("wait.correlation_key", v); err != nil {
			return nil, err
		}
		if plan.correlationKey == "" {
			return nil, exprError(errors.New("wait.correlation_key is empty"))
		}
	}
	switch {
	case w.Timer > 0:
		plan.wakeIn = time.Duration(w.Timer)
	case w.Until != nil:
		t, _, err := rs.renderTime(ctx, f, "wait.until", w.Until, false)
		if err != nil {
			return nil, err
		}
		plan.wakeAt = t
	}
	if w.Approval != nil && w.Approval.Form != nil {
		// Rendered for every approval (the API shows it), not only for a
		// notify request.
		var err error
		if plan.form, err = rs.render(ctx, f, "wait.approval.form", w.Approval.Form); err != nil {
			return nil, err
		}
	}
	if n := w.Notify; n != nil {
		req := &notifyRequest{Form: plan.form}
		u, err := rs.render(ctx, f, "wait.notify.url", n.URL)
		if err != nil {
			return nil, err
		}
		if req.URL, err = asString("wait.notify.url", u); err != nil {
			return nil, err
		}
		if err := rs.e.checkNotifyURL(ctx, req.URL); err != nil {
			return nil, err
		}
		if req.Headers, err = rs.renderStrings(ctx, f, "wait.notify.headers", n.Headers); err != nil {
			return nil, err
		}
		if n.Body != nil {
			b, err := rs.render(ctx, f, "wait.notify.body", n.Body)
			if err != nil {
				return nil, err
			}
			m, ok := b.(map[string]any)
			if !ok && b != nil {
				return nil, exprError(fmt.Errorf("wait.notify.body must yield an object, got %s", jsonType(b)))
			}
			req.Body = m
		}
		plan.notify = req
	}
	return plan, nil
}

// renderTime renders a time template: an RFC 3339 timestamp, returned as
// at, or (when durationOK) a positive duration, returned as after and left
// for the store to add to the database's now (SPEC §5: a deadline the
// database compares is never computed on the runner's clock).
func (rs *runState) renderTime(ctx context.Context, f *frame, what string, v any, durationOK bool) (at time.Time, after time.Duration, err error) {
	x, err := rs.render(ctx, f, what, v)
	if err != nil {
		return time.Time{}, 0, err
	}
	str, ok := x.(string)
	if !ok {
		return time.Time{}, 0, exprError(fmt.Errorf("%s must yield an RFC 3339 timestamp string, got %s", what, jsonType(x)))
	}
	if t, err := time.Parse(time.RFC3339, str); err == nil {
		return t.UTC(), 0, nil
	}
	if durationOK {
		if d, err := time.ParseDuration(str); err == nil && d > 0 {
			return time.Time{}, d, nil
		}
		return time.Time{}, 0, exprError(fmt.Errorf("%s %q is neither an RFC 3339 timestamp nor a positive duration", what, str))
	}
	return time.Time{}, 0, exprError(fmt.Errorf("%s %q is not an RFC 3339 timestamp", what, str))
}

// childNamespace makes child run ids: uuid v5 of (parent, scope, step),
// so re-entering the same wait, in this attempt or a later one, names the
// same child (a workflow_call starts its child once per step instance, as
// a service_call's Idempotency-Key is the same across attempts).
var childNamespace = uuid.MustParse("6f1c1d5e-8a43-4c4e-9a59-3f2b7d0c5e11")

// childParams resolves a workflow_call: the child's depth (within
// Limits.ChildDepth), its definition (by name, current or pinned
// revision), its input (an object, checked against its input_schema,
// scrubbed of the parent's secrets), and its identity.
func (rs *runState) childParams(ctx context.Context, f *frame, s *workflow.Step) (*state.EnqueueRunParams, error) {
	c := s.WorkflowCall
	// The cap on nesting, from the depth stored with this run (decision
	// 260): it holds across restarts, attempts and runners, whichever
	// process started the parent. Checked before anything is read or
	// written, so a runaway recursion ends at its deepest run.
	if err := rs.e.cfg.Limits.CheckChildDepth(s.ID, c.Workflow, rs.run.Depth); err != nil {
		return nil, step.Permanent(err)
	}
	rev := c.Revision
	if rev == "current" {
		rev = ""
	}
	row, err := rs.e.cfg.Store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: rs.run.WorkspaceID, Name: c.Workflow, Revision: rev})
	if errors.Is(err, starflowtype.ErrNotFound) {
		return nil, step.Permanent(fmt.Errorf("workflow_call: workflow %q%s is not applied in workspace %s", c.Workflow, revNote(rev), rs.run.WorkspaceID))
	}
	if err != nil {
		return nil, err
	}
	def, err := rs.e.Definition(row)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("workflow_call: %w", err))
	}
	input := any(map[string]any{})
	if c.Input != nil {
		if input, err = rs.render(ctx, f, "workflow_call.input", c.Input); err != nil {
			return nil, err
		}
		if _, ok := input.(map[string]any); !ok {
			return nil, typed(starflowtype.ErrorInputInvalid, fmt.Errorf("workflow_call.input must yield an object, got %s", jsonType(input)))
		}
	}
	if input, _, err = def.ApplyDefaults(input); err != nil {
		return nil, typed(starflowtype.ErrorInputInvalid, fmt.Errorf("workflow_call: child %s: %w", c.Workflow, err))
	}
	if err := def.ValidateInput(input); err != nil {
		return nil, typed(starflowtype.ErrorInputInvalid, fmt.Errorf("workflow_call: child %s: %w", c.Workflow, err))
	}
	raw, err := rs.led.json(input)
	if err != nil {
		return nil, err
	}
	if err := rs.e.cfg.Limits.CheckInput(len(raw)); err != nil {
		return nil, step.Permanent(fmt.Errorf("workflow_call: child %s: %w", c.Workflow, err))
	}
	name := childName(rs.run.ID, f.scope, s.ID)
	return &state.EnqueueRunParams{
		ID: ChildRunID(rs.run.ID, f.scope, s.ID), WorkspaceID: rs.run.WorkspaceID, Env: rs.run.Env,
		DefinitionID: row.ID, WorkflowName: row.Name, WorkflowRevision: row.Revision, RunnerPool: def.RunnerPool,
		MaxAttempts: def.MaxAttempts, RecoveryMode: starflowtype.RecoveryMode(def.RecoveryMode),
		TriggerType: starflowtype.TriggerChild, ParentRunID: rs.run.ID, IdempotencyKey: "starflow-child/" + name, Input: raw,
	}, nil
}

// childName identifies the child of a workflow_call step instance:
// "<parent run>/<scope path>/<step id>", the same in every attempt. The
// child's id is its uuid v5 (childNamespace) and its idempotency key
// "starflow-child/" + childName.
func childName(parentRunID, scope, stepID string) string {
	return parentRunID + "/" + scope + "/" + stepID
}

// ChildRunID is the id of the child run that the workflow_call step stepID
// (in scope path scope) of run parentRunID starts: the same for every
// attempt of the parent.
func ChildRunID(parentRunID, scope, stepID string) string {
	return uuid.NewSHA1(childNamespace, []byte(childName(parentRunID, scope, stepID))).String()
}

func revNote(rev string) string {
	if rev == "" {
		return ""
	}
	return " at revision " + shortRevision(rev)
}

// enqueueChild inserts the child run once per step instance: the
// idempotency key returns the first run to a repeat (a re-entered wait, a
// later attempt), and the derived id finds it when the receipt has
// expired (the insert is then refused as a duplicate). The child returned
// may have ended already: RegisterWait then completes the wait from its
// end.
func (rs *runState) enqueueChild(ctx context.Context, p *state.EnqueueRunParams) (*starflowtype.Run, error) {
	defer rs.e.TraceEnqueue(ctx, p).End()
	run, err := rs.e.cfg.Store.EnqueueRun(ctx, p)
	if errors.Is(err, starflowtype.ErrConflict) {
		return rs.e.cfg.Store.GetRun(ctx, &state.GetRunParams{ID: p.ID})
	}
	if err != nil {
		return nil, err
	}
	if rs.e.cfg.OnEnqueue != nil {
		rs.e.cfg.OnEnqueue()
	}
	return run, nil
}
