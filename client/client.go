// Package client is a small typed Go client of Starflow's HTTP API
// (`starflow server`, `starflow dev`; docs/api.md). Every method sends
// one request; an answer that is not 2xx comes back as an *api.Problem
// (errors.As), whose Status, Code and Detail say what went wrong.
//
//	c := client.New("http://127.0.0.1:8480", os.Getenv("STARFLOW_API_KEY"))
//	run, created, err := c.Enqueue(ctx, "orders", client.EnqueueOptions{
//		Input: json.RawMessage(`{"id": 7}`), IdempotencyKey: "order-7"})
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
)

// Client calls one Starflow server. Safe for concurrent use.
type Client struct {
	base *url.URL
	key  string
	http *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends requests through hc (default: a client with a 60 s
// timeout).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// New returns a client of the server at baseURL (e.g.
// "http://127.0.0.1:8480") sending apiKey as a bearer token ("" sends
// none: a loopback server without keys). A baseURL that does not parse
// makes every call fail with that error.
func New(baseURL, apiKey string, opts ...Option) *Client {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		u = nil
	}
	c := &Client{base: u, key: apiKey, http: &http.Client{Timeout: 60 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c
}

// ErrBadURL is returned by every call of a client whose base URL is not
// an absolute http(s) URL.
var ErrBadURL = errors.New("client: the server URL must be absolute, http:// or https://")

// do sends one request: body (nil, []byte sent as is with contentType, or
// a value sent as JSON) and decodes a 2xx JSON answer into out (nil: the
// body is dropped). It returns the status.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, header http.Header, body any, contentType string, out any) (int, error) {
	if c.base == nil {
		return 0, ErrBadURL
	}
	// path is escaped (each name through url.PathEscape): keep it as
	// sent, so a name holding "/" or "%" stays one segment.
	u := *c.base
	unescaped, err := url.PathUnescape(path)
	if err != nil {
		return 0, fmt.Errorf("client: path %q: %w", path, err)
	}
	u.Path, u.RawPath = c.base.Path+unescaped, c.base.EscapedPath()+path
	u.RawQuery = query.Encode()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			return 0, err
		}
		rd, contentType = bytes.NewReader(raw), "application/json"
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return 0, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		p := &api.Problem{}
		if json.Unmarshal(raw, p) != nil || p.Status == 0 {
			p = &api.Problem{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode), Detail: strings.TrimSpace(string(raw))}
		}
		return resp.StatusCode, p
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: the answer is not the JSON expected: %w", method, path, err)
		}
	}
	return resp.StatusCode, nil
}

func (c *Client) get(ctx context.Context, path string, query url.Values, out any) error {
	_, err := c.do(ctx, http.MethodGet, path, query, nil, nil, "", out)
	return err
}

func (c *Client) post(ctx context.Context, path string, body, out any) error {
	_, err := c.do(ctx, http.MethodPost, path, nil, nil, body, "", out)
	return err
}

func esc(s string) string { return url.PathEscape(s) }

// sourceType is the Content-Type of a definition file: JSON by its
// extension, YAML otherwise.
func sourceType(filename string) string {
	if strings.HasSuffix(strings.ToLower(filename), ".json") {
		return "application/json"
	}
	return "application/yaml"
}

// Apply stores a definition's source (YAML, or JSON when filename ends in
// .json) as the current revision of workflow name (PUT
// /api/workflows/{name}; admin).
func (c *Client) Apply(ctx context.Context, name, filename string, src []byte) (*api.Applied, error) {
	out := &api.Applied{}
	_, err := c.do(ctx, http.MethodPut, "/api/workflows/"+esc(name), nil, nil, src, sourceType(filename), out)
	return out, err
}

// Validate checks a definition without storing it (POST /admin/validate).
func (c *Client) Validate(ctx context.Context, filename string, src []byte) (*api.Validation, error) {
	out := &api.Validation{}
	_, err := c.do(ctx, http.MethodPost, "/admin/validate", nil, nil, src, sourceType(filename), out)
	return out, err
}

// Plan reports what applying src would do to in-flight runs (POST
// /api/workflows/{name}/plan).
func (c *Client) Plan(ctx context.Context, name, filename string, src []byte) (*starflow.Plan, error) {
	out := &starflow.Plan{}
	_, err := c.do(ctx, http.MethodPost, "/api/workflows/"+esc(name)+"/plan", nil, nil, src, sourceType(filename), out)
	return out, err
}

// Workflows lists each workflow's current revision (GET /api/workflows).
func (c *Client) Workflows(ctx context.Context) ([]*starflowtype.Definition, error) {
	out := &api.WorkflowList{}
	return out.Workflows, c.get(ctx, "/api/workflows", nil, out)
}

// Workflow reads a workflow's current revision with its spec and source.
func (c *Client) Workflow(ctx context.Context, name string) (*starflowtype.Definition, error) {
	out := &starflowtype.Definition{}
	return out, c.get(ctx, "/api/workflows/"+esc(name), nil, out)
}

// Revisions lists a workflow's revisions, the most recently applied first.
func (c *Client) Revisions(ctx context.Context, name string) ([]*starflowtype.Definition, error) {
	out := &api.RevisionList{}
	return out.Revisions, c.get(ctx, "/api/workflows/"+esc(name)+"/revisions", nil, out)
}

// Revision reads one stored revision of workflow name, with its spec and
// source (GET /api/workflows/{name}/revisions/{revision}); revision is
// the sha256 hex a Definition carries. A revision the workflow never had
// is a 404 problem.
func (c *Client) Revision(ctx context.Context, name, revision string) (*starflowtype.Definition, error) {
	out := &starflowtype.Definition{}
	return out, c.get(ctx, "/api/workflows/"+esc(name)+"/revisions/"+esc(revision), nil, out)
}

// Me says who the client's key is (GET /api/me): its id, name, role,
// workspace and env; Auth "open" on a server without keys.
func (c *Client) Me(ctx context.Context) (*api.Me, error) {
	out := &api.Me{}
	return out, c.get(ctx, "/api/me", nil, out)
}

// Health reads the health page (GET /api/health): the store and warm
// tier, the live runners, the server's recent lease sweeps and the newest
// recovery events of the caller's workspace.
func (c *Client) Health(ctx context.Context) (*api.HealthReport, error) {
	out := &api.HealthReport{}
	return out, c.get(ctx, "/api/health", nil, out)
}

// EnqueueOptions is an enqueue: the body of POST /run/{workflow}/enqueue
// and its Idempotency-Key.
type EnqueueOptions struct {
	api.EnqueueRequest
	IdempotencyKey string
}

// Enqueue enqueues a run of workflow (operator). created is false when
// the idempotency key was used before and the first run came back.
func (c *Client) Enqueue(ctx context.Context, workflow string, o EnqueueOptions) (run *starflowtype.Run, created bool, err error) {
	if len(o.Input) == 0 {
		o.Input = json.RawMessage("{}")
	}
	h := http.Header{}
	if o.IdempotencyKey != "" {
		h.Set("Idempotency-Key", o.IdempotencyKey)
	}
	view := &api.RunView{}
	status, err := c.do(ctx, http.MethodPost, "/run/"+esc(workflow)+"/enqueue", nil, h, o.EnqueueRequest, "", view)
	if view.Run == nil {
		view.Run = &starflowtype.Run{}
	}
	return view.Run, status == http.StatusCreated, err
}

// ListRunsOptions filters GET /api/runs. Zero fields are "any".
type ListRunsOptions struct {
	Status        []starflowtype.RunStatus
	Workflow      string
	Parent        string
	Stale         bool
	CreatedAfter  time.Time
	CreatedBefore time.Time
	Limit         int
	Cursor        string
}

func (o *ListRunsOptions) query() url.Values {
	q := url.Values{}
	if len(o.Status) > 0 {
		ss := make([]string, len(o.Status))
		for i, s := range o.Status {
			ss[i] = string(s)
		}
		q.Set("status", strings.Join(ss, ","))
	}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("workflow", o.Workflow)
	set("parent", o.Parent)
	set("cursor", o.Cursor)
	if o.Stale {
		q.Set("stale", "true")
	}
	if !o.CreatedAfter.IsZero() {
		q.Set("created_after", o.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if !o.CreatedBefore.IsZero() {
		q.Set("created_before", o.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return q
}

// Runs lists one page of runs, newest first (GET /api/runs).
func (c *Client) Runs(ctx context.Context, o ListRunsOptions) (*api.RunList, error) {
	out := &api.RunList{}
	return out, c.get(ctx, "/api/runs", o.query(), out)
}

// DeadLetters lists one page of dead-lettered runs.
func (c *Client) DeadLetters(ctx context.Context, limit int, cursor string) (*api.RunList, error) {
	return c.ListDeadLetters(ctx, ListRunsOptions{Limit: limit, Cursor: cursor})
}

// ListDeadLetters lists one page of dead-lettered runs (GET
// /api/dead-letters), newest first: of o.Workflow when set, o.Limit per
// page from o.Cursor. The other fields of o are not filters of that route
// and are ignored.
func (c *Client) ListDeadLetters(ctx context.Context, o ListRunsOptions) (*api.RunList, error) {
	o = ListRunsOptions{Workflow: o.Workflow, Limit: o.Limit, Cursor: o.Cursor}
	out := &api.RunList{}
	return out, c.get(ctx, "/api/dead-letters", o.query(), out)
}

// Run reads a run by id or unique id prefix (≥ 8 hex digits), with its
// why-stuck reason (api.RunView.Stuck, nil when it is not stuck).
func (c *Client) Run(ctx context.Context, id string) (*api.RunView, error) {
	out := &api.RunView{}
	return out, c.get(ctx, "/api/runs/"+esc(id), nil, out)
}

// Ledger reads a run, its steps and its events.
func (c *Client) Ledger(ctx context.Context, id string) (*api.Ledger, error) {
	out := &api.Ledger{}
	return out, c.get(ctx, "/api/runs/"+esc(id)+"/ledger", nil, out)
}

// Events lists a run's events with id > after (at most limit; 0: the
// server's default, 1,000).
func (c *Client) Events(ctx context.Context, id string, after int64, limit int) ([]*starflowtype.Event, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", strconv.FormatInt(after, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	out := &api.EventList{}
	return out.Events, c.get(ctx, "/api/runs/"+esc(id)+"/events", q, out)
}

// Checkpoints lists a run's checkpoints.
func (c *Client) Checkpoints(ctx context.Context, id string) ([]*starflowtype.Checkpoint, error) {
	out := &api.CheckpointList{}
	return out.Checkpoints, c.get(ctx, "/api/runs/"+esc(id)+"/checkpoints", nil, out)
}

// Waits lists a run's durable waits.
func (c *Client) Waits(ctx context.Context, id string) ([]*starflowtype.Wait, error) {
	out := &api.WaitList{}
	return out.Waits, c.get(ctx, "/api/runs/"+esc(id)+"/waits", nil, out)
}

// Children lists one page of a run's child runs.
func (c *Client) Children(ctx context.Context, id string, limit int, cursor string) (*api.RunList, error) {
	o := ListRunsOptions{Limit: limit, Cursor: cursor}
	out := &api.RunList{}
	return out, c.get(ctx, "/api/runs/"+esc(id)+"/children", o.query(), out)
}

// Resume queues a stopped run again (admin): mode resume or replay,
// revision pinned or current ("" for the defaults).
func (c *Client) Resume(ctx context.Context, id string, mode starflowtype.RecoveryMode, revision string) (*starflowtype.Run, error) {
	out := &api.RunView{}
	return out.Run, c.post(ctx, "/api/runs/"+esc(id)+"/resume", api.ResumeRequest{Mode: mode, Revision: revision}, out)
}

// Cancel cancels a run (operator).
func (c *Client) Cancel(ctx context.Context, id string) (*starflowtype.Run, error) {
	out := &api.RunView{}
	return out.Run, c.post(ctx, "/api/runs/"+esc(id)+"/cancel", nil, out)
}

// Retrigger replays a run as a new attempt (operator).
func (c *Client) Retrigger(ctx context.Context, id string) (*starflowtype.Run, error) {
	out := &api.RunView{}
	return out.Run, c.post(ctx, "/api/runs/"+esc(id)+"/retrigger", nil, out)
}

// Redrive queues a dead-lettered run again (operator).
func (c *Client) Redrive(ctx context.Context, id string) (*starflowtype.Run, error) {
	out := &api.RunView{}
	return out.Run, c.post(ctx, "/api/dead-letters/"+esc(id)+"/redrive", nil, out)
}

// Signal sends signal name with payload (nil: null) to a run (operator).
func (c *Client) Signal(ctx context.Context, id, name string, payload json.RawMessage) (*api.SignalResult, error) {
	out := &api.SignalResult{}
	return out, c.post(ctx, "/api/runs/"+esc(id)+"/signal", api.SignalRequest{Name: name, Payload: payload}, out)
}

// SignalKey sends signal name to the run waiting with correlationKey.
func (c *Client) SignalKey(ctx context.Context, name, correlationKey string, payload json.RawMessage) (*api.SignalResult, error) {
	out := &api.SignalResult{}
	return out, c.post(ctx, "/api/signals", api.KeySignalRequest{Name: name, CorrelationKey: correlationKey, Payload: payload}, out)
}

// Wake wakes the wait a wake token names (POST /wake/{token}; the token
// is the authority, no key is needed).
func (c *Client) Wake(ctx context.Context, token string, payload json.RawMessage) (*WakeResult, error) {
	out := &WakeResult{}
	var body any
	if len(payload) > 0 {
		body = []byte(payload)
	}
	_, err := c.do(ctx, http.MethodPost, "/wake/"+esc(token), nil, nil, body, "application/json", out)
	return out, err
}

// WakeResult is the answer to a wake: the woken wait.
type WakeResult struct {
	ID     string                  `json:"id"`
	RunID  string                  `json:"run_id"`
	StepID string                  `json:"step_id"`
	Status starflowtype.WaitStatus `json:"status"`
}

// SessionVars lists a session's variables.
func (c *Client) SessionVars(ctx context.Context, session string) ([]*starflowtype.SessionVar, error) {
	out := &api.SessionVarList{}
	return out.Vars, c.get(ctx, "/api/sessions/"+esc(session)+"/vars", nil, out)
}

// SessionVar reads one session variable.
func (c *Client) SessionVar(ctx context.Context, session, key string) (*starflowtype.SessionVar, error) {
	out := &starflowtype.SessionVar{}
	return out, c.get(ctx, "/api/sessions/"+esc(session)+"/vars/"+esc(key), nil, out)
}

// SetSessionVar writes one session variable (operator); keepFor 0 keeps
// it until deleted.
func (c *Client) SetSessionVar(ctx context.Context, session, key string, value json.RawMessage, keepFor time.Duration) (*starflowtype.SessionVar, error) {
	body := api.SessionVarRequest{Value: value}
	if keepFor > 0 {
		body.KeepFor = keepFor.String()
	}
	out := &starflowtype.SessionVar{}
	_, err := c.do(ctx, http.MethodPut, "/api/sessions/"+esc(session)+"/vars/"+esc(key), nil, nil, body, "", out)
	return out, err
}

// DeleteSessionVar deletes one session variable (operator).
func (c *Client) DeleteSessionVar(ctx context.Context, session, key string) error {
	_, err := c.do(ctx, http.MethodDelete, "/api/sessions/"+esc(session)+"/vars/"+esc(key), nil, nil, nil, "", nil)
	return err
}

// CreateKey creates an API key in the caller's workspace (admin); the
// answer's Secret is the key, shown only now.
func (c *Client) CreateKey(ctx context.Context, name string, role starflowtype.Role, env string) (*api.CreatedKey, error) {
	out := &api.CreatedKey{}
	return out, c.post(ctx, "/api/keys", api.KeyRequest{Name: name, Role: role, Env: env}, out)
}

// Keys lists the API keys of the caller's workspace (admin).
func (c *Client) Keys(ctx context.Context, revoked bool) ([]*starflowtype.APIKey, error) {
	q := url.Values{}
	if revoked {
		q.Set("revoked", "true")
	}
	out := &api.KeyList{}
	return out.Keys, c.get(ctx, "/api/keys", q, out)
}

// RevokeKey revokes an API key of the caller's workspace (admin).
func (c *Client) RevokeKey(ctx context.Context, id string) (*starflowtype.APIKey, error) {
	out := &starflowtype.APIKey{}
	_, err := c.do(ctx, http.MethodDelete, "/api/keys/"+esc(id), nil, nil, nil, "", out)
	return out, err
}
