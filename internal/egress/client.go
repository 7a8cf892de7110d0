package egress

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxRedirects is how many redirects one request follows.
const MaxRedirects = 5

// crossOriginHeaders are the only headers a redirect to another origin
// carries: every other one (the definition's, Authorization, cookies,
// Idempotency-Key, Starflow-Fencing-Token, Content-Type) is dropped.
var crossOriginHeaders = map[string]bool{"Accept": true, "User-Agent": true}

// RedirectError is a redirect the client refused to follow: one past
// MaxRedirects, or one that would re-send the request body to another
// origin.
type RedirectError struct {
	Reason string
}

func (e *RedirectError) Error() string { return e.Reason }

// Client returns an HTTP client that dials through the policy (the
// Control hook, after DNS resolution) and follows redirects under
// CheckRedirect. It uses no proxy from the environment: through a proxy
// the policy would see the proxy's address, not the service's. Each
// request is bounded by its context; connecting by 30 s.
func (p *Policy) Client() *http.Client {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control, Resolver: p.resolver}
	t := &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: t, CheckRedirect: CheckRedirect}
}

// CheckRedirect is the client's redirect policy (http.Client
// CheckRedirect): at most MaxRedirects redirects; Referer is never sent;
// a redirect to another origin (scheme, host and port) than the first
// request's keeps only the Accept and User-Agent headers, and is refused
// when it would re-send a request body (307, 308). A redirect back to the
// first request's origin carries its headers again — except Authorization,
// Cookie and the other credentials net/http drops for the rest of the chain
// once a redirect has left the first host name. The new request's address
// is checked by the dialer like any other.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return &RedirectError{Reason: fmt.Sprintf("stopped after %d redirects", MaxRedirects)}
	}
	req.Header.Del("Referer")
	if len(via) == 0 || Origin(req.URL) == Origin(via[0].URL) {
		return nil
	}
	if req.Body != nil && req.Body != http.NoBody {
		return &RedirectError{Reason: fmt.Sprintf("a redirect to another origin (%s) would re-send the request body; not followed", Origin(req.URL))}
	}
	for k := range req.Header {
		if !crossOriginHeaders[k] {
			delete(req.Header, k)
		}
	}
	return nil
}

// Origin is u's scheme://host:port, lower case, with the scheme's default
// port made explicit.
func Origin(u *url.URL) string {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
