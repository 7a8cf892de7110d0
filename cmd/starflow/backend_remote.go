package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// remoteBackend acts through the HTTP API of a Starflow server (package
// client), with the API key of STARFLOW_API_KEY or --api-key. The server
// acts in the key's workspace (and env): a run of another workspace is
// not found, as it would be in another store.
type remoteBackend struct {
	c       *client.Client
	url     string
	key     string
	flagArg string // " --server URL" when the flag named it
	// stucks are the why-stuck reasons of the runs read, by id.
	stucks map[string]*starflowtype.Stuck
}

// remotePageMax is the largest page the API serves (runs); remoteEventsPage
// is the page of events asked for at a time.
const (
	remotePageMax    = 500
	remoteEventsPage = 10000
)

// newRemoteBackend checks the server URL (exit 2 when it is not an
// absolute http(s) URL) and returns its backend.
func newRemoteBackend(raw, key, flagArg string) (*remoteBackend, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageError("server %q: want the server's URL, http://HOST:PORT or https://HOST:PORT (--server or %s)", raw, envServer)
	}
	base := strings.TrimRight(raw, "/")
	return &remoteBackend{c: client.New(base, key), url: base, key: key, flagArg: flagArg}, nil
}

func (r *remoteBackend) where() string { return "on the server at " + r.url }
func (r *remoteBackend) arg() string   { return r.flagArg }
func (r *remoteBackend) close()        {}

func (r *remoteBackend) open(context.Context) error { return nil }

// remoteError is a problem the server answered, as an error: its text is
// the server's sentence (the engine's or the store's error, as a local
// command would see it), and errors.Is sees the sentinel its status and
// code stand for.
type remoteError struct {
	p        *api.Problem
	sentinel error // nil: none
}

func (e *remoteError) Error() string { return e.p.Error() }
func (e *remoteError) Unwrap() error { return e.sentinel }

// fail turns what the client returned into the CLI's errors: a problem
// into its sentinel (404 ErrNotFound, 409 by code, 410 ErrWaitClosed, 400
// ErrInvalid), or, for what only a server says, a sentence for people
// (exit 1): a key missing, unknown or revoked (401), a role too weak
// (403), over the rate limit (429), a server that failed (5xx) or cannot
// be reached.
func (r *remoteBackend) fail(err error) error {
	if err == nil {
		return nil
	}
	var p *api.Problem
	if errors.As(err, &p) {
		return r.problem(p)
	}
	if errors.Is(err, context.Canceled) {
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return &exitError{code: 1, msg: fmt.Sprintf("cannot reach the server at %s: %s", r.url, oneLine(ue.Err.Error()))}
	}
	return err
}

func (r *remoteBackend) problem(p *api.Problem) error {
	switch {
	case p.Status == http.StatusUnauthorized && r.key == "":
		return &exitError{code: 1, msg: fmt.Sprintf("the server at %s needs an API key: set %s to one (starflow keys create makes keys)", r.url, envAPIKey)}
	case p.Status == http.StatusUnauthorized:
		return &exitError{code: 1, msg: fmt.Sprintf("the server at %s refused the API key (%s or --api-key): %s", r.url, envAPIKey, p.Error())}
	case p.Status == http.StatusForbidden:
		return &exitError{code: 1, msg: "the API key is not allowed to do this (its role or env is too narrow): " + p.Error()}
	case p.Status == http.StatusTooManyRequests:
		return &exitError{code: 1, msg: fmt.Sprintf("the server at %s is limiting this key's rate: %s", r.url, p.Error())}
	case p.Status >= 500:
		return &exitError{code: 1, msg: fmt.Sprintf("the server at %s failed (%d %s): %s", r.url, p.Status, http.StatusText(p.Status), p.Error())}
	}
	e := &remoteError{p: p}
	switch p.Status {
	case http.StatusNotFound:
		e.sentinel = starflowtype.ErrNotFound
	case http.StatusConflict:
		switch p.Code {
		case api.CodeRevisionMismatch:
			e.sentinel = starflowtype.ErrRevisionMismatch
		case api.CodeNoCheckpoint:
			e.sentinel = starflowtype.ErrNoCheckpoint
		default:
			e.sentinel = starflowtype.ErrConflict
		}
	case http.StatusGone:
		e.sentinel = starflowtype.ErrWaitClosed
	case http.StatusBadRequest:
		e.sentinel = starflowtype.ErrInvalid
	}
	return e
}

// payloadFail is fail for a call carrying a signal or wake payload: a
// payload the server refused (400, 413) is ErrPayloadInvalid, as the
// engine's refusal is locally (exit 2, nothing sent).
func (r *remoteBackend) payloadFail(err error) error {
	var p *api.Problem
	if errors.As(err, &p) && (p.Status == http.StatusBadRequest || p.Status == http.StatusRequestEntityTooLarge) {
		return &remoteError{p: p, sentinel: starflowtype.ErrPayloadInvalid}
	}
	return r.fail(err)
}

// validate asks the server (POST /admin/validate), so its step types and
// limits decide; a valid definition is then parsed here for its name,
// steps and revision, trusting the server on step types.
func (r *remoteBackend) validate(ctx context.Context, path string, src []byte) (*workflow.Definition, error) {
	v, err := r.c.Validate(ctx, path, src)
	if err != nil {
		return nil, r.fail(err)
	}
	if !v.Valid {
		errs := make(workflow.Errors, len(v.Errors))
		for i, e := range v.Errors {
			errs[i] = &workflow.Error{File: path, Line: e.Line, Column: e.Column, Msg: e.Message}
		}
		return nil, &errs
	}
	return workflow.Parse(path, src, workflow.ParseOptions{IsStepType: func(string) bool { return true }, Limits: workflow.NoLimits()})
}

func (r *remoteBackend) apply(ctx context.Context, path string, src []byte) (*starflowtype.Definition, error) {
	def, err := r.validate(ctx, path, src)
	if err != nil {
		return nil, err
	}
	a, err := r.c.Apply(ctx, def.Name, path, src)
	if err != nil {
		return nil, r.fail(err)
	}
	return a.Definition, nil
}

func (r *remoteBackend) plan(ctx context.Context, path string, src []byte) (*starflow.Plan, error) {
	def, err := r.validate(ctx, path, src)
	if err != nil {
		return nil, err
	}
	p, err := r.c.Plan(ctx, def.Name, path, src)
	return p, r.fail(err)
}

func (r *remoteBackend) enqueue(ctx context.Context, name string, input json.RawMessage, o *starflow.EnqueueOptions) (*starflowtype.Run, error) {
	eo := client.EnqueueOptions{IdempotencyKey: o.IdempotencyKey}
	eo.Input, eo.RecoveryMode, eo.Pool, eo.Priority = input, o.RecoveryMode, o.Pool, o.Priority
	if o.Delay > 0 {
		eo.Delay = o.Delay.String()
	}
	run, _, err := r.c.Enqueue(ctx, name, eo)
	return run, r.fail(err)
}

// listRuns reads pages of at most remotePageMax runs until p.Limit.
func (r *remoteBackend) listRuns(ctx context.Context, p *state.ListRunsParams) ([]*api.RunView, error) {
	want := p.Limit
	if want <= 0 {
		want = 50
	}
	o := client.ListRunsOptions{Status: p.Status, Workflow: p.WorkflowName}
	list := r.c.Runs
	if p.DeadLettered {
		list = r.c.ListDeadLetters // failed runs only: the status is the route's
	}
	var out []*api.RunView
	for len(out) < want {
		o.Limit = min(want-len(out), remotePageMax)
		page, err := list(ctx, o)
		if err != nil {
			return nil, r.fail(err)
		}
		out = append(out, page.Runs...)
		if page.NextCursor == "" {
			break
		}
		o.Cursor = page.NextCursor
	}
	return out, nil
}

// run asks GET /api/runs/{ref}: the server resolves a prefix in the
// key's workspace.
func (r *remoteBackend) run(ctx context.Context, ref string) (*starflowtype.Run, error) {
	run, err := r.c.Run(ctx, ref)
	if err != nil {
		return nil, r.fail(err)
	}
	if r.stucks == nil {
		r.stucks = map[string]*starflowtype.Stuck{}
	}
	r.stucks[run.ID] = run.Stuck
	return run.Run, nil
}

// stuck is the stuck field of the answer run read, or of a new read.
func (r *remoteBackend) stuck(ctx context.Context, run *starflowtype.Run) (*starflowtype.Stuck, error) {
	if st, ok := r.stucks[run.ID]; ok {
		return st, nil
	}
	got, err := r.c.Run(ctx, run.ID)
	if err != nil {
		return nil, r.fail(err)
	}
	return got.Stuck, nil
}

func (r *remoteBackend) steps(ctx context.Context, runID string, attempt int) ([]*starflowtype.Step, error) {
	l, err := r.c.Ledger(ctx, runID)
	if err != nil {
		return nil, r.fail(err)
	}
	if attempt == 0 {
		return l.Steps, nil
	}
	return slices.DeleteFunc(l.Steps, func(s *starflowtype.Step) bool { return s.Attempt != attempt }), nil
}

func (r *remoteBackend) checkpoints(ctx context.Context, runID string, attempt int) ([]*starflowtype.Checkpoint, error) {
	cps, err := r.c.Checkpoints(ctx, runID)
	if err != nil {
		return nil, r.fail(err)
	}
	if attempt == 0 {
		return cps, nil
	}
	return slices.DeleteFunc(cps, func(c *starflowtype.Checkpoint) bool { return c.Attempt != attempt }), nil
}

// events reads pages of remoteEventsPage events until a short one.
func (r *remoteBackend) events(ctx context.Context, runID string, after int64) ([]*starflowtype.Event, error) {
	var out []*starflowtype.Event
	for {
		evs, err := r.c.Events(ctx, runID, after, remoteEventsPage)
		if err != nil {
			return nil, r.fail(err)
		}
		out = append(out, evs...)
		if len(evs) < remoteEventsPage {
			return out, nil
		}
		after = evs[len(evs)-1].ID
	}
}

func (r *remoteBackend) waits(ctx context.Context, runID string, limit int, pending bool) ([]*starflowtype.Wait, error) {
	ws, err := r.c.Waits(ctx, runID)
	if err != nil {
		return nil, r.fail(err)
	}
	if pending {
		ws = slices.DeleteFunc(ws, func(w *starflowtype.Wait) bool { return w.Status != starflowtype.WaitPending })
	}
	if limit <= 0 {
		limit = 100 // state.ListWaitsParams' default
	}
	if len(ws) > limit {
		ws = ws[:limit]
	}
	return ws, nil
}

// definition is the workflow's current revision when the run is on it:
// the API serves no other revision's spec.
func (r *remoteBackend) definition(ctx context.Context, run *starflowtype.Run) (*starflowtype.Definition, error) {
	d, err := r.c.Workflow(ctx, run.WorkflowName)
	if err != nil {
		return nil, r.fail(err)
	}
	if d.Revision != run.WorkflowRevision {
		return nil, starflowtype.ErrNotFound
	}
	return d, nil
}

func (r *remoteBackend) resume(ctx context.Context, runID string, o *starflow.ResumeOptions) (*starflowtype.Run, error) {
	run, err := r.c.Resume(ctx, runID, o.Mode, o.Revision)
	return run, r.fail(err)
}

func (r *remoteBackend) retrigger(ctx context.Context, runID string) (*starflowtype.Run, error) {
	run, err := r.c.Retrigger(ctx, runID)
	return run, r.fail(err)
}

func (r *remoteBackend) cancel(ctx context.Context, runID string) (*starflowtype.Run, error) {
	run, err := r.c.Cancel(ctx, runID)
	return run, r.fail(err)
}

func (r *remoteBackend) signal(ctx context.Context, runID, name string, payload json.RawMessage) (*state.SignalResult, error) {
	res, err := r.c.Signal(ctx, runID, name, payload)
	if err != nil {
		return nil, r.payloadFail(err)
	}
	return &state.SignalResult{Wait: res.Wait, Inbox: res.Inbox}, nil
}

func (r *remoteBackend) signalKey(ctx context.Context, name, key string, payload json.RawMessage) (*state.SignalResult, error) {
	res, err := r.c.SignalKey(ctx, name, key, payload)
	if err != nil {
		return nil, r.payloadFail(err)
	}
	return &state.SignalResult{Wait: res.Wait, Inbox: res.Inbox}, nil
}

// wake posts to /wake/{token}, which needs no key: its 401 is the token
// refused (ErrTokenInvalid), 410 the wait closed. The woken wait's scope
// is read from the run's waits when the key may (the answer has its step
// only).
func (r *remoteBackend) wake(ctx context.Context, token string, payload json.RawMessage) (*starflowtype.Wait, error) {
	res, err := r.c.Wake(ctx, token, payload)
	var p *api.Problem
	if errors.As(err, &p) && p.Status == http.StatusUnauthorized {
		return nil, &remoteError{p: p, sentinel: starflowtype.ErrTokenInvalid}
	}
	if err != nil {
		return nil, r.payloadFail(err)
	}
	w := &starflowtype.Wait{ID: res.ID, RunID: res.RunID, StepID: res.StepID, Status: res.Status}
	if ws, err := r.c.Waits(ctx, res.RunID); err == nil {
		if i := slices.IndexFunc(ws, func(x *starflowtype.Wait) bool { return x.ID == res.ID }); i >= 0 {
			w.ScopePath = ws[i].ScopePath
		}
	}
	return w, nil
}

// callerWorkspace is the workspace the server acts in for the caller's
// key: that of the keys it lists (GET /api/keys lists the caller's
// workspace only; the caller's own key is among them). A server holding
// no key yet (open on loopback) lists none: "" then.
func (r *remoteBackend) callerWorkspace(keys []*starflowtype.APIKey) string {
	if len(keys) == 0 {
		return ""
	}
	return keys[0].WorkspaceID
}

// checkWorkspace refuses a --workspace the server would not act in: the
// server creates and lists keys in its caller's workspace only.
func (r *remoteBackend) checkWorkspace(want string, keys []*starflowtype.APIKey) error {
	if want == "" {
		return nil
	}
	switch have := r.callerWorkspace(keys); {
	case have == "":
		return &exitError{code: 1, msg: fmt.Sprintf("the server at %s holds no API key yet, so its answer would be in its own workspace, which it does not say: drop --workspace, or create the key in the store (starflow keys create … --db PATH or --store URL)", r.url)}
	case have != want:
		return &exitError{code: 1, msg: fmt.Sprintf("--workspace %s: the API key acts in workspace %s, and the server manages only its caller's workspace; use a key of workspace %s, or the store (--db PATH or --store URL)", want, have, want)}
	}
	return nil
}

func (r *remoteBackend) createKey(ctx context.Context, p *keyParams) (*starflowtype.APIKey, string, error) {
	if p.Workspace != "" {
		keys, err := r.c.Keys(ctx, false)
		if err != nil {
			return nil, "", r.fail(err)
		}
		if err := r.checkWorkspace(p.Workspace, keys); err != nil {
			return nil, "", err
		}
	}
	ck, err := r.c.CreateKey(ctx, p.Name, p.Role, p.Env)
	if err != nil {
		return nil, "", r.fail(err)
	}
	return ck.Key, ck.Secret, nil
}

func (r *remoteBackend) listKeys(ctx context.Context, workspace string) ([]*starflowtype.APIKey, error) {
	keys, err := r.c.Keys(ctx, true)
	if err != nil {
		return nil, r.fail(err)
	}
	if err := r.checkWorkspace(workspace, keys); err != nil {
		return nil, err
	}
	return keys, nil
}

func (r *remoteBackend) revokeKey(ctx context.Context, id string) (*starflowtype.APIKey, error) {
	k, err := r.c.RevokeKey(ctx, id)
	return k, r.fail(err)
}
