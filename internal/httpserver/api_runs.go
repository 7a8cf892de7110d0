package httpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// RunIDParam names a run by its id or a unique prefix of it.
type RunIDParam struct {
	ID string `path:"id" minLength:"8" maxLength:"36" doc:"The run's id, or a unique prefix of at least 8 hex digits."`
}

type runOutput struct {
	Status int
	Body   *api.RunView
}
type runDetailOutput struct{ Body *api.RunView }
type runListOutput struct{ Body *api.RunList }
type ledgerOutput struct{ Body *api.Ledger }
type eventsOutput struct{ Body *api.EventList }
type checkpointsOutput struct{ Body *api.CheckpointList }
type waitsOutput struct{ Body *api.WaitList }

type listRunsInput struct {
	Status        []string  `query:"status" enum:"queued,running,paused,succeeded,failed,interrupted,cancelled" doc:"Only runs in these statuses (comma-separated)."`
	Workflow      string    `query:"workflow" maxLength:"200" doc:"Only runs of this workflow."`
	Parent        string    `query:"parent" maxLength:"36" doc:"Only the child runs of this run (its id)."`
	Stale         bool      `query:"stale" doc:"Only running runs whose last heartbeat is older than the lease TTL."`
	CreatedAfter  time.Time `query:"created_after" doc:"Only runs created at or after this instant (RFC 3339)."`
	CreatedBefore time.Time `query:"created_before" doc:"Only runs created before this instant (RFC 3339)."`
	PageParams
}

type PageParams struct {
	Limit  int    `query:"limit" minimum:"1" maximum:"500" default:"50" doc:"At most this many runs."`
	Cursor string `query:"cursor" maxLength:"200" doc:"The next_cursor of the previous page."`
}

type enqueueInput struct {
	Workflow       string `path:"workflow" minLength:"1" maxLength:"200"`
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"255" doc:"Makes the enqueue idempotent: a repeat returns the first run (200) instead of creating one (201)."`
	Traceparent    string `header:"traceparent" maxLength:"55" doc:"W3C trace context of the caller: with tracing on, the new run's trace (trace_id) is the caller's, its enqueue span a child of this one."`
	Tracestate     string `header:"tracestate" maxLength:"512" doc:"W3C trace state sent with traceparent."`
	Body           api.EnqueueRequest
}

type eventsInput struct {
	RunIDParam
	After int64 `query:"after" minimum:"0" doc:"Only events with an id greater than this."`
	Limit int   `query:"limit" minimum:"1" maximum:"10000" default:"1000" doc:"At most this many events."`
}

func (s *apiServer) registerRuns() {
	huma.Register(s.api, with(withErrors(limited(op("enqueue-run", http.MethodPost, "/run/{workflow}/enqueue", starflowtype.RoleOperator,
		"Enqueue a run of the workflow's current revision (or body.revision)", "runs")),
		http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge), func(o *huma.Operation) {
		o.DefaultStatus = http.StatusCreated
		// The input's own cap (Limits.InputBytes) answers first, with its
		// hint; the body may hold the input and the options around it.
		*o = s.withBody(*o, bodyRule{limit: workflow.LimitInputBytes, max: s.engine.Limits().InputBytes, json: true})
		o.Responses = map[string]*huma.Response{"200": {
			Description: "An idempotent repeat (the Idempotency-Key was used before with the same request): the first run.",
			Content: map[string]*huma.MediaType{"application/json": {
				Schema: s.api.OpenAPI().Components.Schemas.Schema(reflect.TypeFor[api.RunView](), true, "RunView"),
			}},
		}}
	}),
		s.enqueue)
	huma.Register(s.api, op("list-runs", http.MethodGet, "/api/runs", starflowtype.RoleViewer,
		"List runs, newest first, a page at a time", "runs"),
		func(ctx context.Context, in *listRunsInput) (*runListOutput, error) {
			p := &state.ListRunsParams{WorkflowName: in.Workflow, CreatedAfter: in.CreatedAfter, CreatedBefore: in.CreatedBefore}
			for _, st := range in.Status {
				p.Status = append(p.Status, starflowtype.RunStatus(st))
			}
			if in.Parent != "" {
				parent, err := s.run(ctx, in.Parent)
				if err != nil {
					return nil, err
				}
				p.ParentRunID = parent.ID
			}
			if in.Stale {
				p.Status = []starflowtype.RunStatus{starflowtype.RunRunning}
				p.StaleBefore = s.cfg.Now().Add(-s.cfg.LeaseTTL)
			}
			return s.listRuns(ctx, p, in.PageParams)
		})
	huma.Register(s.api, withErrors(op("get-run", http.MethodGet, "/api/runs/{id}", starflowtype.RoleViewer,
		"Read a run, with why it is stuck (stuck: {reason, since, detail}) when it is", "runs"), http.StatusNotFound),
		func(ctx context.Context, in *RunIDParam) (*runDetailOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			runs, err := s.withStuck(ctx, []*starflowtype.Run{r})
			if err != nil {
				return nil, err
			}
			return &runDetailOutput{Body: runs[0]}, nil
		})
	huma.Register(s.api, withErrors(op("get-run-ledger", http.MethodGet, "/api/runs/{id}/ledger", starflowtype.RoleViewer,
		"Read a run's ledger: the run, its step rows (every attempt) and its events", "runs"), http.StatusNotFound),
		func(ctx context.Context, in *RunIDParam) (*ledgerOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			steps, err := s.store.ListSteps(ctx, &state.ListStepsParams{RunID: r.ID})
			if err != nil {
				return nil, s.fail(err)
			}
			events, err := s.store.ListEvents(ctx, &state.ListEventsParams{RunID: r.ID})
			if err != nil {
				return nil, s.fail(err)
			}
			return &ledgerOutput{&api.Ledger{Run: api.NewRunView(r, nil), Steps: nonNil(steps), Events: nonNil(events)}}, nil
		})
	huma.Register(s.api, withErrors(op("list-run-events", http.MethodGet, "/api/runs/{id}/events", starflowtype.RoleViewer,
		"List a run's events after an id, oldest first", "runs"), http.StatusNotFound),
		func(ctx context.Context, in *eventsInput) (*eventsOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			events, err := s.store.ListEvents(ctx, &state.ListEventsParams{RunID: r.ID, AfterID: in.After, Limit: in.Limit})
			if err != nil {
				return nil, s.fail(err)
			}
			return &eventsOutput{&api.EventList{Events: nonNil(events)}}, nil
		})
	huma.Register(s.api, withErrors(op("list-run-checkpoints", http.MethodGet, "/api/runs/{id}/checkpoints", starflowtype.RoleViewer,
		"List a run's checkpoints (each step's changed context keys, masked, and output), in creation order", "runs"), http.StatusNotFound),
		func(ctx context.Context, in *RunIDParam) (*checkpointsOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			cps, err := s.store.ListCheckpoints(ctx, &state.ListCheckpointsParams{RunID: r.ID})
			if err != nil {
				return nil, s.fail(err)
			}
			return &checkpointsOutput{&api.CheckpointList{Checkpoints: nonNil(cps)}}, nil
		})
	huma.Register(s.api, withErrors(op("list-run-waits", http.MethodGet, "/api/runs/{id}/waits", starflowtype.RoleViewer,
		"List a run's durable waits (every attempt), oldest first", "runs"), http.StatusNotFound),
		func(ctx context.Context, in *RunIDParam) (*waitsOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			ws, err := s.engine.Waits(ctx, r.ID)
			if err != nil {
				return nil, s.fail(err)
			}
			for _, w := range ws {
				w.TokenHash = "" // nothing a caller needs; keep it off the wire
			}
			return &waitsOutput{&api.WaitList{Waits: nonNil(ws)}}, nil
		})
	huma.Register(s.api, withErrors(op("list-run-children", http.MethodGet, "/api/runs/{id}/children", starflowtype.RoleViewer,
		"List a run's child runs (workflow_call), newest first", "runs"), http.StatusNotFound),
		func(ctx context.Context, in *struct {
			RunIDParam
			PageParams
		}) (*runListOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			return s.listRuns(ctx, &state.ListRunsParams{ParentRunID: r.ID}, in.PageParams)
		})
	huma.Register(s.api, op("list-dead-letters", http.MethodGet, "/api/dead-letters", starflowtype.RoleViewer,
		"List dead-lettered runs (out of attempts), newest first", "dead letters"),
		func(ctx context.Context, in *struct {
			Workflow string `query:"workflow" maxLength:"200" doc:"Only runs of this workflow."`
			PageParams
		}) (*runListOutput, error) {
			// Dead letters are failed runs: the status index serves them.
			return s.listRuns(ctx, &state.ListRunsParams{WorkflowName: in.Workflow, DeadLettered: true,
				Status: []starflowtype.RunStatus{starflowtype.RunFailed}}, in.PageParams)
		})
}

// enqueue serves POST /run/{workflow}/enqueue.
func (s *apiServer) enqueue(ctx context.Context, in *enqueueInput) (*runOutput, error) {
	b := &in.Body
	opts := &starflow.EnqueueOptions{
		ID: uuid.NewString(), Revision: b.Revision, IdempotencyKey: in.IdempotencyKey, RecoveryMode: b.RecoveryMode,
		Pool: b.Pool, Priority: b.Priority, MaxAttempts: b.MaxAttempts, Trigger: starflowtype.TriggerAPI,
	}
	if b.Delay != "" {
		d, err := workflow.ParseDuration(b.Delay)
		switch {
		case err != nil && errors.Is(err, workflow.ErrDurationTooLarge):
			return nil, huma.Error400BadRequest(fmt.Sprintf("delay %q is %v", b.Delay, err))
		case err != nil || d < 0:
			return nil, huma.Error400BadRequest(fmt.Sprintf("delay %q: want a duration such as 30s or 1h (not negative)", b.Delay))
		}
		opts.Delay = d
	}
	opts.CompareRequest = true
	if p := principalOf(ctx); p != nil && p.browser {
		opts.Trigger = starflowtype.TriggerDashboard // a signed-in page's request
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	ctx = s.engine.ExtractTrace(ctx, http.Header{"Traceparent": {in.Traceparent}, "Tracestate": {in.Tracestate}})
	r, err := s.engine.Enqueue(ctx, in.Workflow, json.RawMessage(b.Input), opts)
	keyTaken := conflict(api.CodeConflict, fmt.Sprintf("Idempotency-Key %q was used with a different request; nothing was enqueued (use another key)", in.IdempotencyKey))
	if err != nil {
		if errors.Is(err, starflowtype.ErrConflict) && in.IdempotencyKey != "" {
			return nil, keyTaken
		}
		return nil, s.fail(err)
	}
	status := http.StatusCreated
	if r.ID != opts.ID {
		// An idempotent repeat: the first run — unless it is of an env
		// the caller cannot see (receipts are per workspace).
		if p := principalOf(ctx); !p.sees(r.WorkspaceID, r.Env) {
			return nil, keyTaken
		}
		status = http.StatusOK
	}
	return &runOutput{Status: status, Body: api.NewRunView(r, nil)}, nil
}

// listRuns answers one page of a run listing.
func (s *apiServer) listRuns(ctx context.Context, p *state.ListRunsParams, page PageParams) (*runListOutput, error) {
	pr := principalOf(ctx)
	p.WorkspaceID, p.Env = pr.workspace, pr.env
	p.Limit = page.Limit
	if p.Limit <= 0 {
		p.Limit = listLimitDefault
	}
	if page.Cursor != "" {
		c, err := decodeCursor(page.Cursor)
		if err != nil {
			return nil, huma.Error400BadRequest("cursor: not a next_cursor this server gave (" + err.Error() + ")")
		}
		p.After = c
	}
	want := p.Limit
	p.Limit++ // one more says whether a next page exists
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	runs, err := s.store.ListRuns(ctx, p)
	if err != nil {
		return nil, s.fail(err)
	}
	out := &api.RunList{}
	if len(runs) > want {
		last := runs[want-1]
		out.NextCursor = EncodeCursor(&state.RunCursor{CreatedAt: last.CreatedAt, ID: last.ID})
		runs = runs[:want]
	}
	if out.Runs, err = s.withStuck(ctx, runs); err != nil {
		return nil, err
	}
	return &runListOutput{out}, nil
}

// withStuck pairs each run with its why-stuck reason (Engine.StuckMany:
// a bounded number of statements for the whole page).
func (s *apiServer) withStuck(ctx context.Context, runs []*starflowtype.Run) ([]*api.RunView, error) {
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	stuck, err := s.engine.StuckMany(ctx, runs)
	if err != nil {
		return nil, s.fail(err)
	}
	out := make([]*api.RunView, len(runs))
	for i, r := range runs {
		out[i] = api.NewRunView(r, stuck[r.ID])
	}
	return out, nil
}

// cursorJSON is the text inside an opaque cursor.
type cursorJSON struct {
	T time.Time `json:"t"`
	I string    `json:"i"`
}

// EncodeCursor is the next_cursor of a listing whose last run is at c
// (opaque to clients: base64url of a small JSON object).
func EncodeCursor(c *state.RunCursor) string {
	raw, _ := json.Marshal(cursorJSON{T: c.CreatedAt.UTC(), I: c.ID})
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeCursor(s string) (*state.RunCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, errors.New("not base64url")
	}
	var c cursorJSON
	if err := json.Unmarshal(raw, &c); err != nil || c.T.IsZero() {
		return nil, errors.New("not a position")
	}
	if _, err := uuid.Parse(c.I); err != nil {
		return nil, errors.New("not a run id")
	}
	return &state.RunCursor{CreatedAt: c.T, ID: c.I}, nil
}

// run finds the run an id or id prefix names in the caller's workspace
// (and env): another workspace's run is 404, like one that does not
// exist.
func (s *apiServer) run(ctx context.Context, id string) (*starflowtype.Run, error) {
	p := principalOf(ctx)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	notFound := huma.Error404NotFound(fmt.Sprintf("run %s not found", id))
	visible := func(id string) (*starflowtype.Run, error) {
		r, err := s.store.GetRun(ctx, &state.GetRunParams{WorkspaceID: p.workspace, ID: id})
		if errors.Is(err, starflowtype.ErrNotFound) || (err == nil && !p.sees(r.WorkspaceID, r.Env)) {
			return nil, notFound
		}
		if err != nil {
			return nil, s.fail(err)
		}
		return r, nil
	}
	if _, err := uuid.Parse(id); err == nil && len(id) == 36 {
		return visible(id)
	}
	if n := hexDigits(id); n < 8 || n != len(strings.ReplaceAll(id, "-", "")) {
		return nil, huma.Error400BadRequest(fmt.Sprintf("run id %q: want a run id or a prefix of at least 8 hex digits", id))
	}
	ids, err := s.store.FindRunIDs(ctx, &state.FindRunIDsParams{WorkspaceID: p.workspace, Prefix: id, Limit: 2})
	if err != nil {
		return nil, s.fail(err)
	}
	var found []*starflowtype.Run
	for _, cand := range ids {
		// Of the caller's env only: a run it cannot see neither answers
		// nor makes a prefix ambiguous.
		if r, err := visible(cand); err == nil {
			found = append(found, r)
		} else if !errors.Is(err, notFound) {
			return nil, err
		}
	}
	switch len(found) {
	case 0:
		return nil, notFound
	case 1:
		return found[0], nil
	}
	return nil, huma.Error400BadRequest(fmt.Sprintf("run id prefix %q is ambiguous: give more of the id", id))
}

// hexDigits counts the hex digits of s.
func hexDigits(s string) int {
	n := 0
	for _, c := range s {
		if ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F') {
			n++
		}
	}
	return n
}

// nonNil is s, or an empty slice for nil (a JSON [] rather than null).
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
