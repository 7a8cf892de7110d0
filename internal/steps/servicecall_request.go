package steps

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/starflow/starflow/internal/redact"
)

// notCredentials are header and query parameter names (lower case) that
// credentialName's substrings match but that carry no secret:
// Idempotency-Key is the step's stable name (<run_id>/<scope_path>/<step_id>),
// and Starflow-Fencing-Token the run's id and lease epoch — both made of
// ids the run's rows show anyway, and both worth seeing when a service
// answers about them (a duplicate, a stale epoch).
var notCredentials = map[string]bool{
	"idempotency-key":        true,
	"starflow-fencing-token": true,
}

// credentialName reports whether a header or query parameter named name
// carries a credential by its nature, whatever its value: Authorization,
// Proxy-Authorization, Cookie, X-Api-Key, and any name holding "token",
// "secret", "key" or "auth" in any case — except notCredentials.
func credentialName(name string) bool {
	n := strings.ToLower(name)
	if notCredentials[n] {
		return false
	}
	if n == "cookie" {
		return true
	}
	for _, part := range []string{"token", "secret", "key", "auth"} {
		if strings.Contains(n, part) {
			return true
		}
	}
	return false
}

// sentRequest is the request part of a service_call's output: {method,
// url, headers}, scrubbed of secrets by value (red) and of credentials by
// name (credentialName: the value becomes redact.Mask).
func sentRequest(red *redact.Redactor, req *http.Request) map[string]any {
	headers := make(map[string]any, len(req.Header))
	for k, vs := range req.Header {
		v := redact.Mask
		if !credentialName(k) {
			v = red.String(strings.Join(vs, ", "))
		}
		headers[strings.ToLower(k)] = v
	}
	return map[string]any{
		"method":  req.Method,
		"url":     red.String(sentURL(req.URL)),
		"headers": headers,
	}
}

// sentURL is u as sent, for the output: without user info and fragment,
// and with the value of each query parameter named as a credential
// (credentialName) replaced by redact.Mask. The query keeps its order and
// escaping otherwise. The secrets' values are scrubbed by the caller.
func sentURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.Fragment, c.RawFragment = "", ""
	if c.RawQuery != "" {
		pairs := strings.Split(c.RawQuery, "&")
		for i, p := range pairs {
			k, _, hasValue := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if hasValue && credentialName(name) {
				pairs[i] = k + "=" + redact.Mask
			}
		}
		c.RawQuery = strings.Join(pairs, "&")
	}
	return c.String()
}
