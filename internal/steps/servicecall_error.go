package steps

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/starflow/starflow/internal/egress"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/redact"
)

// Error types of a service_call's failures (SPEC §2 error types): the
// values of starflowtype.ErrorHTTP and starflowtype.ErrorNetwork.
const (
	TypeHTTP    = "http"
	TypeNetwork = "network"
)

// ErrorBodyBytes bounds the response body a *StatusError carries as its
// Payload (bytes, after scrubbing): what a catch sees as error.body.
const ErrorBodyBytes = 64 << 10

// StatusError is a response whose status was not expected. Retryable is
// true for 5xx and 429. Its Type is "http".
type StatusError struct {
	Method, URL string
	Status      int
	Body        string // the start of the response body, scrubbed, at most SnippetBytes (+ "…")
	// Payload is the whole response body, scrubbed of secrets: parsed when
	// the Content-Type says JSON and it parses, else the text; nil when
	// the body is empty. A body longer than ErrorBodyBytes is cut to at
	// most ErrorBodyBytes at a character boundary and stays text (JSON
	// included), with no mark of the cut.
	Payload any
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%s %s answered %d %s", e.Method, e.URL, e.Status, http.StatusText(e.Status))
	if e.Body != "" {
		msg += ": " + e.Body
	}
	return msg
}

// Retryable reports whether the status is worth retrying (5xx, 429).
func (e *StatusError) Retryable() bool {
	return e.Status >= 500 || e.Status == http.StatusTooManyRequests
}

// Type is the error's type, TypeHTTP.
func (e *StatusError) Type() string { return TypeHTTP }

// NetworkError is a request that got no answer, or an answer that could
// not be read: refused, reset, DNS, TLS, a read cut short. A request whose
// context ended is not one (Call returns the context's error). Its message
// is "METHOD URL: <Err>", URL without its query and user info.
type NetworkError struct {
	Method, URL string
	Err         error
}

func (e *NetworkError) Error() string { return e.Method + " " + e.URL + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *NetworkError) Unwrap() error { return e.Err }

// Type is the error's type, TypeNetwork.
func (e *NetworkError) Type() string { return TypeNetwork }

// RedirectRefusedError is a redirect the client would not follow (an
// *egress.RedirectError, which Unwrap returns). Its message is
// "METHOD URL: <reason>", URL without its query and user info; its Type
// is "egress_refused", as a refused connection's.
type RedirectRefusedError struct {
	Method, URL string
	Err         *egress.RedirectError
}

func (e *RedirectRefusedError) Error() string { return e.Method + " " + e.URL + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *RedirectRefusedError) Unwrap() error { return e.Err }

// Type is the error's type, egress.TypeRefused.
func (e *RedirectRefusedError) Type() string { return egress.TypeRefused }

// errorPayload is a response body as a *StatusError's Payload: scrubbed
// of secrets first (a cut must never keep part of one), then cut to
// ErrorBodyBytes at a character boundary (a cut body is text), else
// parsed when the Content-Type says JSON and it parses, else the text.
func errorPayload(red *redact.Redactor, contentType string, raw []byte) any {
	if len(raw) == 0 {
		return nil
	}
	s := red.String(string(raw))
	if len(s) > ErrorBodyBytes {
		cut := ErrorBodyBytes
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return s[:cut]
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		if v, err := jsonvalue.Decode([]byte(s)); err == nil {
			// The text was scrubbed; its decoded strings are scrubbed
			// again, as the engine scrubs a step's output.
			return red.Value(v)
		}
	}
	return s
}
