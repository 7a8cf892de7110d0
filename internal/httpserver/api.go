package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// APIConfig configures the HTTP API served beside the health, metrics,
// live and wake routes (Config.API): definitions, enqueue, runs, actions,
// dead letters, session variables, keys and live streams, with API-key
// auth, described by the OpenAPI 3.1 document at GET /openapi.json
// (generated from the handlers' Go types by huma) and rendered at
// GET /docs.
type APIConfig struct {
	// Engine executes and answers. Required.
	Engine *starflow.Engine
	// LeaseTTL is the runners' lease TTL: GET /api/runs?stale=true lists
	// running runs whose last heartbeat is older. Default 30 s.
	LeaseTTL time.Duration
	// MetricsPublic serves /metrics without a key while keys exist.
	MetricsPublic bool
	// Rate is how many enqueue and signal requests per second one key
	// (or, without keys, one client address) may send on average, and
	// how many webhook deliveries one client address may (a bucket of
	// their own).
	// Default APIRateDefault (50); negative turns the limit off. Over it:
	// 429 with Retry-After.
	Rate float64
	// Burst is how many such requests may come at once before Rate
	// applies. Default APIBurstDefault (100).
	Burst int
	// SignInRate is how many POST /ui/sign-in attempts per second one
	// client address may make on average. Default SignInRateDefault (1);
	// negative turns the limit off. Over it the attempt is refused
	// (redirected with error=rate_limited) before the key is checked.
	SignInRate float64
	// SignInBurst is how many attempts may come at once before
	// SignInRate applies. Default SignInBurstDefault (10).
	SignInBurst int
	// Version is the API version in the OpenAPI document. Default "dev".
	Version string
	// Insecure says the listener serves a non-loopback address without
	// keys (--insecure): every request served without a key is logged
	// at warn, naming it.
	Insecure bool
}

// Defaults of APIConfig.
const (
	APIRateDefault  = 50.0
	APIBurstDefault = 100
	// listLimitDefault and listLimitMax bound a page of runs.
	listLimitDefault = 50
	listLimitMax     = 500
)

// apiServer serves the HTTP API.
type apiServer struct {
	cfg    apiSettings
	engine *starflow.Engine
	store  state.Adapter
	api    huma.API
	limit  *clientLimiter // nil: no limit
	live   streams        // open live streams
	// signInLimit bounds POST /ui/sign-in attempts per client address.
	signInLimit *clientLimiter

	stopping chan struct{} // closed when the server shuts down: streams end
	stopOnce sync.Once
}

// stop ends the live streams (the listener's shutdown waits for them).
func (s *apiServer) stop() { s.stopOnce.Do(func() { close(s.stopping) }) }

// apiSettings are the handler Config and APIConfig together, defaults
// filled.
type apiSettings struct {
	APIConfig
	Timeout        time.Duration
	Logger         *slog.Logger
	ClientIPHeader string
	MaxPayload     int64
	Now            func() time.Time
}

// Roles the operations need (huma Operation.Metadata["role"]).
const (
	metaRole    = "role"
	metaLimited = "limited"
)

func init() {
	// Every error huma writes (validation, bad JSON, our handlers') is an
	// RFC 9457 problem document of the api.Problem shape.
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		p := &api.Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: msg}
		for _, err := range errs {
			var d huma.ErrorDetailer
			switch {
			case err == nil:
			case errors.As(err, &d):
				ed := d.ErrorDetail()
				p.Errors = append(p.Errors, api.ProblemError{Message: ed.Message, Location: ed.Location, Value: smallValue(ed.Value)})
			default:
				p.Errors = append(p.Errors, api.ProblemError{Message: err.Error()})
			}
		}
		return p
	}
}

// smallValue is v when its JSON is short (an echo that helps a caller
// see what it sent), nil when it is not: a problem never carries a
// large part of the request back.
func smallValue(v any) any {
	raw, err := json.Marshal(v)
	if err != nil || len(raw) > 200 {
		return nil
	}
	return v
}

// conflict is a 409 problem with a code.
func conflict(code, detail string) error {
	return &api.Problem{Type: "about:blank", Title: "Conflict", Status: http.StatusConflict, Detail: detail, Code: code}
}

// newAPI registers the API's routes on mux.
func newAPI(mux *http.ServeMux, cfg apiSettings) (*apiServer, error) {
	if cfg.Engine == nil {
		return nil, errors.New("httpserver: APIConfig.Engine is required")
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 30 * time.Second
	}
	if cfg.Rate == 0 {
		cfg.Rate = APIRateDefault
	}
	if cfg.Burst == 0 {
		cfg.Burst = APIBurstDefault
	}
	if cfg.Burst < 0 {
		return nil, fmt.Errorf("httpserver: APIConfig.Burst must not be negative, got %d", cfg.Burst)
	}
	if cfg.SignInRate == 0 {
		cfg.SignInRate = SignInRateDefault
	}
	if cfg.SignInBurst <= 0 {
		cfg.SignInBurst = SignInBurstDefault
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	s := &apiServer{cfg: cfg, engine: cfg.Engine, store: cfg.Engine.Store(), stopping: make(chan struct{})}
	if cfg.Rate > 0 {
		s.limit = newClientLimiter(cfg.Rate, cfg.Burst, WakeClientsMax, cfg.Now)
	}
	hc := huma.DefaultConfig("Starflow", cfg.Version)
	hc.CreateHooks = nil // no $schema links in bodies
	hc.Info.Description = "The HTTP API of Starflow, a durable workflow engine. Send an API key as Authorization: Bearer sf_… (docs/api.md says which role each operation needs)."
	hc.RejectUnknownQueryParameters = true
	hc.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "An API key (sf_…) made with starflow keys create."},
	}
	s.api = humago.New(mux, hc)
	s.api.UseMiddleware(s.authorize)
	s.registerDefinitions()
	s.registerRuns()
	s.registerActions()
	s.registerSessions()
	s.registerKeys()
	s.registerLive()
	s.registerHealth()
	s.registerMe()
	s.registerSchedules()
	s.registerHealthReport()
	s.registerJobs()
	s.registerSignIn(mux)
	s.registerWebhooks()
	return s, nil
}

// authorize refuses, before the request is read, an operation the
// principal's role does not allow (403) and an operation over the
// principal's rate (429).
func (s *apiServer) authorize(hctx huma.Context, next func(huma.Context)) {
	op := hctx.Operation()
	need, _ := op.Metadata[metaRole].(starflowtype.Role)
	if need == "" {
		next(hctx)
		return
	}
	p := principalOf(hctx.Context())
	if p == nil || !p.role.Allows(need) {
		have := "no key"
		if p != nil {
			have = "role " + string(p.role)
		}
		want := "role " + string(need) + " or higher"
		if need == starflowtype.RoleWorker {
			want = "role worker or admin"
		}
		_ = huma.WriteErr(s.api, hctx, http.StatusForbidden, fmt.Sprintf("%s %s needs %s; the caller has %s", op.Method, op.Path, want, have))
		return
	}
	if long, _ := op.Metadata[metaLongPoll].(bool); long {
		extendLongPoll(hctx)
	}
	if limited, _ := op.Metadata[metaLimited].(bool); limited && s.limit != nil {
		r, _ := humago.Unwrap(hctx)
		if ok, wait := s.limit.allow(p.limitKey(r, s.cfg.ClientIPHeader)); !ok {
			secs := retryAfterSeconds(wait)
			hctx.SetHeader("Retry-After", strconv.Itoa(secs))
			_ = huma.WriteErr(s.api, hctx, http.StatusTooManyRequests, fmt.Sprintf(
				"this caller sent more than %d such requests at once or more than %g per second; retry after %d s (nothing changed)", s.cfg.Burst, s.cfg.Rate, secs))
			return
		}
	}
	next(hctx)
}

// op is an operation needing role (viewer, operator, admin).
func op(id, method, path string, role starflowtype.Role, summary string, tags ...string) huma.Operation {
	return huma.Operation{
		OperationID: id, Method: method, Path: path, Summary: summary, Tags: tags,
		Description: needsRole(role),
		Metadata:    map[string]any{metaRole: role},
		Security:    []map[string][]string{{"bearer": {}}},
		Errors:      []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden},
	}
}

// needsRole describes who may call an operation needing role.
func needsRole(role starflowtype.Role) string {
	if role == starflowtype.RoleWorker {
		return "Needs role worker (a remote worker's key) or admin."
	}
	return fmt.Sprintf("Needs role %s or higher.", role)
}

// limited marks an operation rate-limited per caller.
func limited(o huma.Operation) huma.Operation {
	o.Metadata[metaLimited] = true
	o.Errors = append(o.Errors, http.StatusTooManyRequests)
	return o
}

// with applies f to o.
func with(o huma.Operation, f func(*huma.Operation)) huma.Operation {
	f(&o)
	return o
}

// withErrors adds documented error statuses.
func withErrors(o huma.Operation, codes ...int) huma.Operation {
	o.Errors = append(o.Errors, codes...)
	return o
}

// ctx bounds one handler's store work.
func (s *apiServer) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// fail turns an engine or store error into the problem the caller gets:
// its own mistakes are 4xx with the engine's sentence (state.Message: no
// store package's prefix, no sentinel's suffix that the status or code
// already says), anything else is logged and answered 500 or 503 without
// the driver's text.
func (s *apiServer) fail(err error) error {
	var limit *workflow.LimitError
	var verrs workflow.Errors
	var se huma.StatusError
	switch {
	case errors.As(err, &se):
		return err
	case errors.Is(err, starflowtype.ErrRevisionMismatch):
		return conflict(api.CodeRevisionMismatch, state.Message(err, starflowtype.ErrRevisionMismatch))
	case errors.Is(err, starflowtype.ErrNoCheckpoint):
		return conflict(api.CodeNoCheckpoint, state.Message(err, starflowtype.ErrNoCheckpoint))
	case errors.Is(err, starflowtype.ErrLeaseLost):
		return conflict(api.CodeLeaseLost, state.Message(err, starflowtype.ErrLeaseLost))
	case errors.Is(err, starflowtype.ErrConflict):
		return conflict(api.CodeConflict, state.Message(err, starflowtype.ErrConflict))
	case errors.Is(err, starflowtype.ErrNotFound):
		return huma.Error404NotFound(state.Message(err, nil))
	case errors.As(err, &limit):
		return huma.Error413RequestEntityTooLarge(state.Message(err, nil))
	case errors.As(err, &verrs):
		// Every problem of the definition, where it is in the source.
		p := &api.Problem{Type: "about:blank", Title: "Unprocessable Entity", Status: http.StatusUnprocessableEntity,
			Detail: fmt.Sprintf("the definition has %d problem(s): %s", len(verrs), verrs[0].Msg)}
		for _, e := range verrs {
			p.Errors = append(p.Errors, api.ProblemError{Message: e.Msg, Location: sourceLocation(e)})
		}
		return p
	case errors.Is(err, starflowtype.ErrInvalid), errors.Is(err, starflowtype.ErrPayloadInvalid),
		errors.Is(err, starflowtype.ErrTokenInvalid):
		return huma.Error400BadRequest(state.Message(err, nil))
	case errors.Is(err, context.DeadlineExceeded):
		s.cfg.Logger.Warn("api: the store did not answer in time", "error", err)
		return huma.Error503ServiceUnavailable("the store did not answer in time; retry")
	}
	s.cfg.Logger.Error("api: request failed", "error", err)
	return huma.Error500InternalServerError("the request failed inside the server (its log has the details); retry or report it")
}

// sourceLocation is where in the body a definition's problem is:
// body:LINE:COLUMN, body:LINE when only the line is known (a YAML syntax
// error), body when neither is.
func sourceLocation(e *workflow.Error) string {
	switch {
	case e.Line == 0:
		return "body"
	case e.Column == 0:
		return fmt.Sprintf("body:%d", e.Line)
	}
	return fmt.Sprintf("body:%d:%d", e.Line, e.Column)
}

type readyOutput struct {
	Status int
	Body   *api.Ready
}

func (s *apiServer) registerHealth() {
	huma.Register(s.api, huma.Operation{
		OperationID: "get-readiness", Method: http.MethodGet, Path: "/readyz", Tags: []string{"health"},
		Summary: "Readiness: the store answers and holds the newest schema (503 when not); needs no key",
		Errors:  []int{http.StatusServiceUnavailable},
	}, func(ctx context.Context, _ *struct{}) (*readyOutput, error) {
		ctx, cancel := s.ctx(ctx)
		defer cancel()
		out := &api.Ready{Ready: true, Checked: s.cfg.Now().UTC()}
		// api_keys is the newest table: reading it proves the store
		// answers and is migrated.
		if _, err := s.store.APIKeysConfigured(ctx); err != nil {
			s.cfg.Logger.Warn("readyz: the store is not ready", "error", err)
			out.Ready, out.Detail = false, "the store does not answer or is not migrated (starflow migrate); the log has the details"
			return &readyOutput{Status: http.StatusServiceUnavailable, Body: out}, nil
		}
		return &readyOutput{Status: http.StatusOK, Body: out}, nil
	})
}
