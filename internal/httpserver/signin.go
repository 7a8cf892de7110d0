package httpserver

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Browser sign-in (the dashboard): POST /ui/sign-in checks an API key and
// keeps it in an HttpOnly cookie; the API then takes that cookie as the
// key of a request without an Authorization header. A request
// authenticated so with an unsafe method must carry CSRFHeader equal to
// CSRFCookie (the double-submit pattern): a page of another site cannot
// read the cookie, and a plain HTML form cannot set a header.
const (
	// KeyCookie holds the signed-in API key (HttpOnly, SameSite=Strict,
	// Path=/, Secure under TLS (overTLS), for SessionMaxAge).
	KeyCookie = "starflow_key"
	// CSRFCookie holds the sign-in's CSRF token: 32 random bytes,
	// base64url without padding. Not HttpOnly: the dashboard's script
	// reads it and sends it back as CSRFHeader.
	CSRFCookie = "starflow_csrf"
	// CSRFHeader must equal CSRFCookie on every POST, PUT, PATCH and
	// DELETE a sign-in cookie authenticates.
	CSRFHeader = "X-Starflow-CSRF"
	// SessionMaxAge is how long the sign-in cookies last: 12 hours.
	SessionMaxAge = 12 * time.Hour
)

// Defaults of APIConfig.SignInRate and SignInBurst: the sign-in attempts
// one client address may make, per second on average and at once.
// Guessing a key (256 random bits) is hopeless anyway; the limit keeps a
// flood of attempts off the store.
const (
	SignInRateDefault  = 1.0
	SignInBurstDefault = 10
)

// signInBodyMax bounds the sign-in form: a key, a next path.
const signInBodyMax = 8 << 10

// The error= codes POST /ui/sign-in redirects to /sign-in with.
const (
	signInMissing     = "missing"      // no key in the form
	signInMalformed   = "malformed"    // not sf_ and 43 characters
	signInUnknown     = "unknown"      // no such key
	signInRevoked     = "revoked"      // the key was revoked
	signInLimited     = "rate_limited" // too many attempts from this address
	signInUnavailable = "unavailable"  // the store did not answer
)

// forgedDetail is the 403 of a cookie-authenticated unsafe request
// without the CSRF header.
const forgedDetail = "this request carries the sign-in cookie but no " + CSRFHeader + " header equal to the " + CSRFCookie +
	" cookie, so it looks forged (a page of another site, or a plain HTML form); nothing changed. The dashboard sends the header; scripts send Authorization: Bearer sf_…"

// registerSignIn adds POST /ui/sign-in and POST /ui/sign-out to mux.
func (s *apiServer) registerSignIn(mux *http.ServeMux) {
	if s.cfg.SignInRate > 0 {
		s.signInLimit = newClientLimiter(s.cfg.SignInRate, s.cfg.SignInBurst, WakeClientsMax, s.cfg.Now)
	}
	mux.HandleFunc("POST /ui/sign-in", s.signIn)
	mux.HandleFunc("POST /ui/sign-out", s.signOut)
}

// signIn serves POST /ui/sign-in: form fields key and next (a path of
// this site, default /). A key that is well formed, known and not revoked
// gets the two sign-in cookies and a 303 to next; anything else a 303 to
// /sign-in?error=CODE (&next=…), never echoing the key.
func (s *apiServer) signIn(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	if s.signInLimit != nil {
		if ok, _ := s.signInLimit.allow(clientKey(r, s.cfg.ClientIPHeader)); !ok {
			signInFailed(w, r, signInLimited, "/")
			return
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, signInBodyMax)
	if err := r.ParseForm(); err != nil {
		signInFailed(w, r, signInMissing, "/")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if key == "" {
		signInFailed(w, r, signInMissing, next)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	if _, _, bad := s.checkKey(ctx, key); bad != keyOK {
		code := map[keyCheck]string{keyMalformed: signInMalformed, keyUnknown: signInUnknown, keyRevoked: signInRevoked}[bad]
		if code == "" {
			code = signInUnavailable
		}
		signInFailed(w, r, code, next)
		return
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	setSessionCookies(w, r, key, base64.RawURLEncoding.EncodeToString(b[:]), int(SessionMaxAge/time.Second))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signOut serves POST /ui/sign-out: both cookies cleared, 303 to
// /sign-in.
func (s *apiServer) signOut(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	setSessionCookies(w, r, "", "", -1) // Max-Age=0: delete now
	http.Redirect(w, r, "/sign-in", http.StatusSeeOther)
}

// setSessionCookies sets (or, with maxAge < 0, deletes) the two sign-in
// cookies.
func setSessionCookies(w http.ResponseWriter, r *http.Request, key, csrf string, maxAge int) {
	for _, c := range []*http.Cookie{
		{Name: KeyCookie, Value: key, HttpOnly: true},
		{Name: CSRFCookie, Value: csrf},
	} {
		c.Path, c.MaxAge, c.Secure, c.SameSite = "/", maxAge, overTLS(r), http.SameSiteStrictMode
		http.SetCookie(w, c)
	}
}

// overTLS reports whether the browser sent r over TLS: to this listener,
// or to a TLS-terminating proxy that says so (X-Forwarded-Proto: https,
// or Forwarded: proto=https). The headers are believed without a trusted
// proxy: they only ever add Secure, which keeps a cookie off plain HTTP,
// so a client that forges them only keeps its own cookies from itself.
func overTLS(r *http.Request) bool {
	if r.TLS != nil || strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https") {
		return true
	}
	for _, elem := range strings.Split(r.Header.Get("Forwarded"), ",") {
		for _, pair := range strings.Split(elem, ";") {
			k, v, _ := strings.Cut(strings.TrimSpace(pair), "=")
			if strings.EqualFold(k, "proto") && strings.EqualFold(strings.Trim(v, `"`), "https") {
				return true
			}
		}
	}
	return false
}

// signInFailed redirects to the sign-in page with code (and next, when it
// is not /).
func signInFailed(w http.ResponseWriter, r *http.Request, code, next string) {
	q := url.Values{"error": {code}}
	if next != "/" {
		q.Set("next", next)
	}
	http.Redirect(w, r, "/sign-in?"+q.Encode(), http.StatusSeeOther)
}

// safeNext is next when it is a path of this site — one leading slash
// (not //, which a browser reads as another host), no backslash (which
// browsers read as a slash), no scheme or host, no control character or
// space, valid UTF-8 — and "/" otherwise.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || len(next) > 2000 || !utf8.ValidString(next) ||
		strings.ContainsFunc(next, func(c rune) bool { return c == '\\' || unicode.IsControl(c) || unicode.IsSpace(c) }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

// safeMethod reports whether method changes nothing (GET, HEAD, OPTIONS):
// such requests need no CSRF header.
func safeMethod(method string) bool {
	return method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions
}

// csrfMatches reports whether r carries CSRFHeader equal to its
// CSRFCookie (compared in constant time), both non-empty.
func csrfMatches(r *http.Request) bool {
	c, err := r.Cookie(CSRFCookie)
	h := r.Header.Get(CSRFHeader)
	return err == nil && c.Value != "" && h != "" && subtle.ConstantTimeCompare([]byte(c.Value), []byte(h)) == 1
}
