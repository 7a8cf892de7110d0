package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/danielgtaylor/huma/v2"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/starflowtype"
)

// principal is who sent a request: the API key it carried, or, while no
// key exists, the loopback caller, who acts as an admin of the engine's
// workspace.
type principal struct {
	keyID     string // "" for the open (no keys configured) caller
	keyName   string
	keyHash   string // the key's hash, to check it again (long streams)
	workspace string
	env       string // "" = every env
	role      starflowtype.Role
	// via is how the key came: viaBearer, viaCookie, or "" (the open
	// caller).
	via string
	// browser: the request carries a sign-in cookie (the key's, or only
	// the CSRF cookie of the open caller's page), so an unsafe method
	// needs the CSRF header, and what it enqueues is triggered by the
	// dashboard.
	browser bool
}

// How a principal's key came (principal.via, api.Me.Via).
const (
	viaBearer = "bearer"
	viaCookie = "cookie"
)

// limitKey is the rate-limit bucket of the principal: its key, or the
// client's address when it has none.
func (p *principal) limitKey(r *http.Request, clientIPHeader string) string {
	if p.keyID != "" {
		return "key:" + p.keyID
	}
	return "ip:" + clientKey(r, clientIPHeader)
}

type principalKey struct{}

// principalOf is the request's principal (nil outside the auth
// middleware: a public route).
func principalOf(ctx context.Context) *principal {
	p, _ := ctx.Value(principalKey{}).(*principal)
	return p
}

// protected reports whether a path needs a key once keys exist: the API,
// the enqueue and admin routes, the live views and, unless it is
// public, /metrics. Health, readiness, the OpenAPI document, its
// rendered reference, POST /wake/{token} (whose token is its authority)
// and a workflow's webhook trigger (whose signature is) stay open.
func (s *apiServer) protected(path string) bool {
	switch {
	case triggerPath(path):
		return false
	case strings.HasPrefix(path, "/api/"), path == "/api",
		strings.HasPrefix(path, "/run/"), strings.HasPrefix(path, "/admin/"),
		strings.HasPrefix(path, "/live/"):
		return true
	case path == "/metrics":
		return !s.cfg.MetricsPublic
	}
	return false
}

// authenticate resolves the request's principal and puts it, with the
// engine scope of its workspace and env, in the request's context. It
// answers 401 when a protected route is called without a valid key
// while keys exist, or with a key that is malformed, unknown or revoked
// (a wrong credential is refused even while no key is needed). Public
// routes ignore the Authorization header.
func (s *apiServer) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bad := insane(r); bad != "" {
			problem(w, http.StatusBadRequest, "Bad Request", bad)
			return
		}
		if s.protected(r.URL.Path) {
			// What a key reads (a run's input and output, the keys) is
			// kept by no cache, the browser's included, past the answer
			// (after a sign-out, the back button shows nothing stored);
			// and no browser reads it as another type than it says.
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("X-Content-Type-Options", "nosniff")
		}
		p, status, detail := s.resolve(r)
		if status != 0 {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="starflow"`)
			}
			problem(w, status, http.StatusText(status), detail)
			return
		}
		if p == nil { // public route without credentials
			next.ServeHTTP(w, r)
			return
		}
		if p.role == starflowtype.RoleWorker && !strings.HasPrefix(r.URL.Path, "/api/jobs/") {
			// A remote worker's key serves jobs and reads nothing else:
			// not the runs, not the live views, not the metrics.
			problem(w, http.StatusForbidden, "Forbidden", "a key of role worker may only call the remote-worker routes (/api/jobs/…)")
			return
		}
		if p.browser && !safeMethod(r.Method) && !csrfMatches(r) {
			problem(w, http.StatusForbidden, "Forbidden", forgedDetail)
			return
		}
		if s.cfg.Insecure && p.keyID == "" {
			s.cfg.Logger.Warn("INSECURE: request served without authentication on a non-loopback listener (--insecure); create an API key with starflow keys create",
				"method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		}
		ctx := context.WithValue(r.Context(), principalKey{}, p)
		ctx = starflow.WithScope(ctx, starflow.Scope{Workspace: p.workspace, Env: p.env})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// resolve finds the principal of r: from its Authorization header, else
// from the sign-in cookie (KeyCookie), else — while no key exists — the
// open caller. status is non-zero when r must be refused, with detail
// saying why.
func (s *apiServer) resolve(r *http.Request) (p *principal, status int, detail string) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	if !s.protected(r.URL.Path) {
		return nil, 0, "" // public: its own authority (a wake token) or none
	}
	authz := r.Header.Get("Authorization")
	if authz == "" {
		if c, err := r.Cookie(KeyCookie); err == nil && c.Value != "" {
			k, hash, bad := s.checkKey(ctx, c.Value)
			if bad != keyOK {
				status, detail := bad.refusal(idOf(k))
				return nil, status, "the sign-in cookie " + KeyCookie + ": " + detail + " (sign in again)"
			}
			return keyPrincipal(k, hash, viaCookie), 0, ""
		}
		configured, err := s.store.APIKeysConfigured(ctx)
		if err != nil {
			if r.Context().Err() == nil { // not a client that went away
				s.cfg.Logger.Warn("api: reading api_keys failed", "error", err)
			}
			return nil, http.StatusServiceUnavailable, "the store did not answer; retry"
		}
		if configured {
			return nil, http.StatusUnauthorized, "this server needs an API key: send Authorization: Bearer sf_… (create one with starflow keys create)"
		}
		sc := s.engine.ScopeOf(context.Background())
		_, csrfErr := r.Cookie(CSRFCookie)
		return &principal{workspace: sc.Workspace, role: starflowtype.RoleAdmin, browser: csrfErr == nil}, 0, ""
	}
	scheme, token, ok := strings.Cut(authz, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, http.StatusUnauthorized, "the Authorization header must be Bearer sf_…"
	}
	k, hash, bad := s.checkKey(ctx, strings.TrimSpace(token))
	if bad != keyOK {
		status, detail := bad.refusal(idOf(k))
		return nil, status, detail
	}
	return keyPrincipal(k, hash, viaBearer), 0, ""
}

// keyPrincipal is the principal of key k (of hash hash), sent via.
func keyPrincipal(k *starflowtype.APIKey, hash, via string) *principal {
	return &principal{keyID: k.ID, keyName: k.Name, keyHash: hash, workspace: k.WorkspaceID, env: k.Env, role: k.Role,
		via: via, browser: via == viaCookie}
}

// idOf is k's id, "" for nil.
func idOf(k *starflowtype.APIKey) string {
	if k == nil {
		return ""
	}
	return k.ID
}

// keyCheck is what checkKey found wrong with a key (keyOK: nothing).
type keyCheck int

const (
	keyOK keyCheck = iota
	keyMalformed
	keyUnknown
	keyRevoked
	keyUnavailable // the store did not answer
)

// refusal is the status and detail of a request whose key (of id id,
// when known) failed c.
func (c keyCheck) refusal(id string) (int, string) {
	switch c {
	case keyMalformed:
		return http.StatusUnauthorized, "the API key is malformed (a key is sf_ and 43 characters)"
	case keyUnknown:
		return http.StatusUnauthorized, "the API key is not known to this server"
	case keyRevoked:
		return http.StatusUnauthorized, fmt.Sprintf("the API key %s was revoked", id)
	}
	return http.StatusServiceUnavailable, "the store did not answer; retry"
}

// checkKey finds the key whose text is token: well formed, known, not
// revoked. It returns the key and its hash, or what is wrong (and, when
// it is revoked, the key).
func (s *apiServer) checkKey(ctx context.Context, token string) (*starflowtype.APIKey, string, keyCheck) {
	if !apikey.WellFormed(token) {
		return nil, "", keyMalformed
	}
	hash := apikey.Hash(token)
	k, err := s.store.APIKeyByHash(ctx, hash)
	switch {
	case errors.Is(err, starflowtype.ErrNotFound):
		return nil, "", keyUnknown
	case err != nil:
		if !errors.Is(err, context.Canceled) { // canceled: the client went away
			s.cfg.Logger.Warn("api: reading api_keys failed", "error", err)
		}
		return nil, "", keyUnavailable
	case !k.RevokedAt.IsZero():
		return k, "", keyRevoked
	}
	return k, hash, keyOK
}

// sees reports whether p may see a run of workspace ws and env env.
func (p *principal) sees(ws, env string) bool {
	return ws == p.workspace && (p.env == "" || p.env == env)
}

// stillValid reports whether p's key is still usable (not revoked, not
// deleted): long-lived answers (live streams) check it again while they
// run. The open caller stays valid until a key is created.
func (s *apiServer) stillValid(ctx context.Context, p *principal) bool {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if p.keyID == "" {
		configured, err := s.store.APIKeysConfigured(ctx)
		return err == nil && !configured
	}
	k, err := s.store.APIKeyByHash(ctx, p.keyHash)
	return err == nil && k.RevokedAt.IsZero()
}

// insane says what is wrong with a request whose path, query or headers
// hold a NUL character or bytes that are not UTF-8 (no name, key or
// header value of the API may), "" when nothing is.
func insane(r *http.Request) string {
	bad := func(v string) bool { return !utf8.ValidString(v) || strings.ContainsRune(v, 0) }
	if bad(r.URL.Path) {
		return "the path holds a NUL character or bytes that are not UTF-8"
	}
	for k, vs := range r.URL.Query() {
		for _, v := range vs {
			if bad(k) || bad(v) {
				return fmt.Sprintf("query parameter %q holds a NUL character or bytes that are not UTF-8", k)
			}
		}
	}
	for _, h := range []string{"Idempotency-Key", "Last-Event-ID"} {
		if bad(r.Header.Get(h)) {
			return "header " + h + " holds a NUL character or bytes that are not UTF-8"
		}
	}
	return ""
}

// wholeWorkspace refuses (403) to a key limited to an env what acts on
// objects every env of the workspace shares: applying and planning
// definitions, session variables, signals by correlation key.
func wholeWorkspace(ctx context.Context, what string) error {
	if p := principalOf(ctx); p != nil && p.env != "" {
		return huma.Error403Forbidden(fmt.Sprintf("%s belong to every env of the workspace: this key is limited to env %s; use a key without an env", what, p.env))
	}
	return nil
}
