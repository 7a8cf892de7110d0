package httpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/workflow"
)

// Backend is what the listener serves. *starflow.Engine implements it.
type Backend interface {
	// Health is the health answer of GET /healthz.
	Health(ctx context.Context) starflow.Health
	// LiveRun reads a run's warm entry (starflowtype.ErrNotFound when the
	// warm tier has none; starflow.ErrNoWarm without a warm tier).
	LiveRun(ctx context.Context, runID string) (*warm.RunEntry, error)
	// LiveEvents reads a run's recent events (id > afterID, oldest first)
	// from the warm tier's feed.
	LiveEvents(ctx context.Context, runID string, afterID int64) ([]*warm.EventEntry, error)
	// LiveProgress reads a run's latest step progress reports from warm.
	LiveProgress(ctx context.Context, runID string) ([]*warm.Progress, error)
	// LiveRunners lists the runners whose presence has not expired.
	LiveRunners(ctx context.Context) ([]*warm.Presence, error)
	// Wake resumes the wait a wake token names with payload (JSON; nil is
	// null) as the wait step's output, and returns the woken wait.
	// Errors: starflowtype.ErrTokenInvalid, starflowtype.ErrWaitClosed,
	// starflowtype.ErrNotFound (no wait has that token), others.
	Wake(ctx context.Context, token string, payload json.RawMessage) (*starflowtype.Wait, error)
}

// Config configures the handler.
type Config struct {
	// Backend answers health and live reads. Required.
	Backend Backend
	// Gatherer is exposed on /metrics. Default: an empty registry (the
	// endpoint still answers).
	Gatherer prometheus.Gatherer
	// Registerer, when set, gets the listener's own metrics:
	// starflow_http_requests_total{route, code} and
	// starflow_http_request_duration_seconds{route} (route: the route
	// pattern, never the raw path). Default nil: none.
	Registerer prometheus.Registerer
	// Timeout bounds one health or live read. Default 5 s.
	Timeout time.Duration
	// Logger. Default slog.Default().
	Logger *slog.Logger
	// WakeRate is how many POST /wake/{token} requests per second one
	// client (IP address; an IPv6 client by its /64) may send on average.
	// Default WakeRateDefault (10); negative turns the limit off. A client
	// over it gets 429 with Retry-After, before its body is read.
	WakeRate float64
	// WakeBurst is how many wake requests a client may send at once before
	// WakeRate applies. Default WakeBurstDefault (20).
	WakeBurst int
	// ClientIPHeader names the header a trusted reverse proxy puts the
	// client's address in (X-Forwarded-For, X-Real-IP), for the wake rate
	// limit: its last address is the client when the request comes from a
	// loopback peer. Default "": the connection's peer address (behind a
	// proxy, every client then shares the proxy's limit).
	ClientIPHeader string
	// Now is the clock of the rate limit. Default time.Now.
	Now func() time.Time
	// MaxWakeBody is the largest wake payload POST /wake/{token} reads, in
	// bytes; a longer body is refused with 413 before the backend sees it
	// (the token is not spent). Default MaxWakeBody; negative: no limit.
	// `starflow dev` and `starflow server` set it to the engine's
	// Limits.PayloadBytes.
	MaxWakeBody int64
	// API serves the HTTP API (see APIConfig) on the same listener, and
	// puts every route but /healthz, /readyz, /openapi.json, /docs and
	// POST /wake/{token} behind API keys once a key exists. nil: only
	// the routes above, without auth (loopback use).
	API *APIConfig
}

// TimeoutDefault bounds one health check or live read.
const TimeoutDefault = 5 * time.Second

// LiveRunView is the JSON body of GET /live/runs/{id}: the run's warm entry,
// its latest progress reports and its recent events (the warm feed, oldest
// first).
type LiveRunView struct {
	Run      *warm.RunEntry     `json:"run"`
	Progress []*warm.Progress   `json:"progress"`
	Events   []*warm.EventEntry `json:"events"`
}

// LiveEventsView is the JSON body of GET /live/runs/{id}/events: the run's
// recent events with id > ?after (default 0), oldest first, from the warm
// feed (a client tails by passing the last id it saw).
type LiveEventsView struct {
	Events []*warm.EventEntry `json:"events"`
}

// WakeResult is the JSON body of a successful POST /wake/{token}: the
// woken wait.
type WakeResult struct {
	ID     string                  `json:"id"`
	RunID  string                  `json:"run_id"`
	StepID string                  `json:"step_id"`
	Status starflowtype.WaitStatus `json:"status"`
}

// MaxWakeBody is the default of Config.MaxWakeBody: the largest wake
// payload POST /wake/{token} reads (bytes); a longer body is refused with
// 413.
const MaxWakeBody = 1 << 20 // workflow.PayloadBytesDefault

// LiveRunnersView is the JSON body of GET /live/runners.
type LiveRunnersView struct {
	Runners []*warm.Presence `json:"runners"`
}

// New returns the listener's handler. Routes:
//
//	GET /healthz          starflow.Health; 200 when the cold store answers, 503 when not
//	GET /metrics          Prometheus text exposition
//	GET /live/runs/{id}          LiveRunView from the warm tier (404 absent, 503 warm down or off)
//	GET /live/runs/{id}/events   LiveEventsView, ?after=ID (400 bad after, 503 warm down or off)
//	GET /live/runners            LiveRunnersView from the warm tier (503 warm down or off)
//	POST /wake/{token}           wake the wait the token names with the JSON body as its
//	                             payload (empty: null): 200 WakeResult; 401 token invalid
//	                             (forged, malformed, unknown key, no wait has it); 410 wait
//	                             closed or token expired; 400 body not JSON or holding a
//	                             number with no finite value (1e400); 413 body over
//	                             Config.MaxWakeBody; 415 a Content-Type that is not JSON; 429 the
//	                             client is over WakeRate/WakeBurst (Retry-After in seconds)
//
// With Config.API it also serves the HTTP API (APIConfig; GET
// /openapi.json lists its routes), the browser sign-in (POST /ui/sign-in,
// /ui/sign-out) and the operator dashboard (package dashboard: the page
// at /, /runs, /runs/{id}, /definitions, /dead-letters, /health and
// /sign-in, its files under /ui/).
//
// POST /wake/{token} needs no credentials: the signed, single-use token
// is the capability.
func New(cfg Config) (http.Handler, error) {
	if cfg.Backend == nil {
		return nil, errors.New("httpserver: Config.Backend is required")
	}
	if cfg.Gatherer == nil {
		cfg.Gatherer = prometheus.NewRegistry()
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = TimeoutDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.WakeRate == 0 {
		cfg.WakeRate = WakeRateDefault
	}
	if cfg.WakeBurst == 0 {
		cfg.WakeBurst = WakeBurstDefault
	}
	if cfg.WakeBurst < 0 {
		return nil, fmt.Errorf("httpserver: WakeBurst must not be negative, got %d", cfg.WakeBurst)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxWakeBody == 0 {
		cfg.MaxWakeBody = MaxWakeBody
	}
	h := &handler{cfg: cfg}
	mux := http.NewServeMux()
	hm, err := newHTTPMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	var apiSrv *apiServer
	if cfg.API != nil {
		var err error
		apiSrv, err = newAPI(mux, apiSettings{APIConfig: *cfg.API, Timeout: cfg.Timeout, Logger: cfg.Logger,
			ClientIPHeader: cfg.ClientIPHeader, MaxPayload: cfg.MaxWakeBody, Now: cfg.Now})
		if err != nil {
			return nil, err
		}
		h.api = apiSrv
	}
	if cfg.WakeRate > 0 {
		h.wakeLimit = newClientLimiter(cfg.WakeRate, cfg.WakeBurst, WakeClientsMax, cfg.Now)
	}
	mux.HandleFunc("GET /healthz", h.health)
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Gatherer, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError,
	}))
	mux.HandleFunc("GET /live/runs/{id}", h.liveRun)
	mux.HandleFunc("GET /live/runs/{id}/events", h.liveEvents)
	mux.HandleFunc("GET /live/runners", h.liveRunners)
	// {token...} also matches an empty or slashed remainder, so every
	// POST under /wake/ gets the token's answer (401), never a 404.
	mux.HandleFunc("POST /wake/{token...}", h.wake)
	if apiSrv != nil {
		registerDashboard(mux)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if allow := allowed(mux, r); allow != "" {
			w.Header().Set("Allow", allow)
			problem(w, http.StatusMethodNotAllowed, "method not allowed", fmt.Sprintf("%s %s: only %s", r.Method, r.URL.Path, allow))
			return
		}
		routes := "GET /healthz, /metrics, /live/runs/{id}, /live/runs/{id}/events, /live/runners; POST /wake/{token}"
		if apiSrv != nil {
			routes += "; the API at /api/…, /run/{workflow}/enqueue and /admin/validate (GET /openapi.json lists them); the dashboard at /"
		}
		problem(w, http.StatusNotFound, "not found", fmt.Sprintf("no route %s %s (routes: %s)", r.Method, r.URL.Path, routes))
	})
	if apiSrv == nil {
		return hm.wrap(mux, mux), nil
	}
	// Cross-site requests (a page in a browser, e.g. while no key exists
	// and every loopback caller is an admin) that change anything are
	// refused by Sec-Fetch-Site / Origin (net/http's CrossOriginProtection);
	// POST /wake/{token}, whose token is its authority, and a webhook
	// trigger, whose signature is, stay callable from anywhere.
	csrf := http.NewCrossOriginProtection()
	csrf.AddInsecureBypassPattern("POST /wake/{token...}")
	csrf.AddInsecureBypassPattern("POST /api/workflows/{name}/trigger") // its signature is its authority
	csrf.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		problem(w, http.StatusForbidden, "cross-origin request refused",
			"a browser sent this request from another site (Sec-Fetch-Site or Origin); the API takes no cross-origin requests that change state")
	}))
	return &stoppable{Handler: hm.wrap(mux, csrf.Handler(apiSrv.authenticate(mux))), stop: apiSrv.stop}, nil
}

// stoppable is a handler with long-lived responses (live streams) that
// stop is told to end when the listener shuts down (Server.Serve
// registers it with http.Server.RegisterOnShutdown).
type stoppable struct {
	http.Handler
	stop func()
}

type handler struct {
	cfg       Config
	api       *apiServer     // nil: no API (and no auth)
	wakeLimit *clientLimiter // nil: no limit
}

// allowed is the Allow header of a request the mux routes by another
// method only ("" when no method reaches a route at its path): the
// methods whose probe of the same URL the mux routes elsewhere than the
// catch-all.
func allowed(mux *http.ServeMux, r *http.Request) string {
	var methods []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			methods = append(methods, m)
		}
	}
	return strings.Join(methods, ", ")
}

// wake serves POST /wake/{token}.
func (h *handler) wake(w http.ResponseWriter, r *http.Request) {
	if h.wakeLimit != nil {
		if ok, wait := h.wakeLimit.allow(clientKey(r, h.cfg.ClientIPHeader)); !ok {
			secs := retryAfterSeconds(wait)
			w.Header().Set("Retry-After", strconv.Itoa(secs))
			problem(w, http.StatusTooManyRequests, "too many requests", fmt.Sprintf(
				"this client sent more than %d wake requests at once or more than %g per second; retry after %d s (nothing changed)",
				h.cfg.WakeBurst, h.cfg.WakeRate, secs))
			return
		}
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !isJSONType(ct) {
		problem(w, http.StatusUnsupportedMediaType, "unsupported media type", fmt.Sprintf("Content-Type %q: the wake payload is JSON (send application/json, or no body for null)", ct))
		return
	}
	limit := h.cfg.MaxWakeBody
	if limit < 0 {
		limit = math.MaxInt64
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			problem(w, http.StatusRequestEntityTooLarge, "payload too large", fmt.Sprintf("the wake payload is over the limit of %d bytes %s; nothing changed",
				limit, workflow.LimitPayloadBytes.Hint()))
			return
		}
		problem(w, http.StatusBadRequest, "unreadable body", "reading the wake payload: "+err.Error())
		return
	}
	body = bytes.TrimSpace(body)
	if len(body) > 0 {
		if err := jsonvalue.Validate(body); errors.Is(err, jsonvalue.ErrNonFinite) {
			problem(w, http.StatusBadRequest, "payload number out of range", "the wake payload's "+err.Error()+"; nothing changed, the token is still usable")
			return
		} else if err != nil {
			problem(w, http.StatusBadRequest, "payload is not JSON", "the request body is the wake payload and must be one JSON value (or empty for null)")
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	wt, err := h.cfg.Backend.Wake(ctx, r.PathValue("token"), body)
	var overLimit *workflow.LimitError
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, WakeResult{ID: wt.ID, RunID: wt.RunID, StepID: wt.StepID, Status: wt.Status})
	case errors.Is(err, starflowtype.ErrTokenInvalid):
		problem(w, http.StatusUnauthorized, "wake token invalid", "the token is forged, malformed or signed by an unknown key; nothing changed")
	case errors.Is(err, starflowtype.ErrNotFound):
		// A well-signed token no wait has: as invalid as a forged one (the
		// CLI's exit 3), and no hint whether such a wait exists.
		problem(w, http.StatusUnauthorized, "wake token invalid", "no wait has this token; nothing changed")
	case errors.Is(err, starflowtype.ErrPayloadInvalid):
		problem(w, http.StatusBadRequest, "payload invalid", err.Error()+"; nothing changed, the token is still usable")
	case errors.As(err, &overLimit):
		problem(w, http.StatusRequestEntityTooLarge, "payload too large", overLimit.Error()+"; nothing changed")
	case errors.Is(err, starflowtype.ErrWaitClosed):
		problem(w, http.StatusGone, "wait closed", "the wait is no longer pending or the token expired (a token wakes once; the wait may have been woken, timed out or cancelled); nothing changed")
	default:
		h.cfg.Logger.Warn("wake failed", "error", err)
		problem(w, http.StatusInternalServerError, "wake failed", "the wake could not be applied; retry (a wake that did apply answers 410 to the retry)")
	}
}

// isJSONType reports whether a Content-Type is application/json or a
// +json type.
func isJSONType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

func (h *handler) health(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	hl := h.cfg.Backend.Health(ctx)
	code := http.StatusOK
	if !hl.StoreOK {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, hl)
}

func (h *handler) liveRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if !h.canSee(ctx, id) {
		h.liveError(w, fmt.Sprintf("run %s", id), starflowtype.ErrNotFound)
		return
	}
	run, err := h.cfg.Backend.LiveRun(ctx, id)
	if err != nil {
		h.liveError(w, fmt.Sprintf("run %s", id), err)
		return
	}
	progress, err := h.cfg.Backend.LiveProgress(ctx, id)
	if err != nil {
		h.liveError(w, fmt.Sprintf("progress of run %s", id), err)
		return
	}
	if progress == nil {
		progress = []*warm.Progress{}
	}
	events, err := h.cfg.Backend.LiveEvents(ctx, id, 0)
	if err != nil {
		h.liveError(w, fmt.Sprintf("events of run %s", id), err)
		return
	}
	if events == nil {
		events = []*warm.EventEntry{}
	}
	writeJSON(w, http.StatusOK, LiveRunView{Run: run, Progress: progress, Events: events})
}

func (h *handler) liveEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var after int64
	if s := r.URL.Query().Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			problem(w, http.StatusBadRequest, "bad request", fmt.Sprintf("query parameter after=%q: want an event id (an integer >= 0)", s))
			return
		}
		after = n
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	if !h.canSee(ctx, id) {
		h.liveError(w, fmt.Sprintf("run %s", id), starflowtype.ErrNotFound)
		return
	}
	events, err := h.cfg.Backend.LiveEvents(ctx, id, after)
	if err != nil {
		h.liveError(w, fmt.Sprintf("events of run %s", id), err)
		return
	}
	if events == nil {
		events = []*warm.EventEntry{}
	}
	writeJSON(w, http.StatusOK, LiveEventsView{Events: events})
}

func (h *handler) liveRunners(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	runners, err := h.cfg.Backend.LiveRunners(ctx)
	if err != nil {
		h.liveError(w, "runners", err)
		return
	}
	if runners == nil {
		runners = []*warm.Presence{}
	}
	writeJSON(w, http.StatusOK, LiveRunnersView{Runners: runners})
}

func (h *handler) liveError(w http.ResponseWriter, what string, err error) {
	switch {
	case errors.Is(err, starflowtype.ErrNotFound), errors.Is(err, warm.ErrNotFound):
		problem(w, http.StatusNotFound, "not found", what+": not in the warm tier (live views show runs the warm tier holds; run detail reads the cold store)")
	case errors.Is(err, starflow.ErrNoWarm):
		problem(w, http.StatusServiceUnavailable, "no warm tier", what+": this process runs without a warm store (--warm)")
	default:
		// The warm store's own error text stays in the log.
		h.cfg.Logger.Warn("live read failed", "what", what, "error", err)
		problem(w, http.StatusServiceUnavailable, "warm tier unavailable", what+": the warm store did not answer (the process log has the details)")
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// problem writes an RFC 9457 problem document.
func problem(w http.ResponseWriter, code int, title, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "about:blank", "title": title, "status": code, "detail": detail,
	})
}

// canSee reports whether the caller may see run id: always without the
// API's auth; behind it, when the cold store has the run in the caller's
// workspace and env (warm entries carry no env).
func (h *handler) canSee(ctx context.Context, id string) bool {
	if h.api == nil || principalOf(ctx) == nil {
		return true
	}
	_, err := h.api.run(ctx, id)
	return err == nil
}
