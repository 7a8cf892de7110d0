package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"

	"github.com/starflow/starflow/internal/egress"
	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/internal/redact"
	"github.com/starflow/starflow/step"
)

// MaxResponseBytes bounds how much of a response body is read (bytes).
const MaxResponseBytes = 16 << 20

// SnippetBytes bounds the start of a response body quoted in a
// *StatusError (bytes, before the "…" that marks a cut).
const SnippetBytes = 200

// HTTPRequest is a rendered service_call.
type HTTPRequest struct {
	Method       string
	URL          string
	Headers      map[string]string
	Query        map[string]string
	Body         any // sent as JSON when HasBody
	HasBody      bool
	ExpectStatus []int // empty: any 2xx
	// IdempotencyKey is sent as the Idempotency-Key header.
	IdempotencyKey string
	// FencingToken is sent as the Starflow-Fencing-Token header.
	FencingToken string
	// Redactor scrubs the run's secrets from the output's request (URL and
	// header values) and from the response body a *StatusError carries
	// (Body and Payload), before any cut, so a cut never leaves part of a
	// secret behind. nil scrubs nothing.
	Redactor *redact.Redactor
	// Propagator, when set, writes ctx's trace context into the request's
	// headers (traceparent, tracestate) before the definition's headers,
	// which win over it. nil sends none.
	Propagator propagation.TextMapPropagator
}

// Call sends the request and returns the step output {status, headers,
// body, request}. headers are the response's (lower-case names, values
// joined with ", "); body is parsed as JSON when the response says it is
// JSON, otherwise a string. request is what was sent, {method, url,
// headers}: the method; the URL with its query, without user info or
// fragment; the headers Call set (lower-case names, values joined with
// ", "; not those the transport adds, as Host, Content-Length or
// Accept-Encoding). Both are scrubbed of the run's secrets (r.Redactor),
// and the value of a header or query parameter whose name marks a
// credential (credentialName: Authorization, Cookie, X-Api-Key, api_key,
// access_token, …) is redact.Mask. They describe the first request, not
// one a redirect made.
//
// Errors: a request that got no answer, or whose answer could not be
// read, is a retryable *NetworkError (type "network"); when ctx has ended,
// the error wraps ctx's cause instead, and is no *NetworkError. An
// unexpected 5xx/429 is a retryable *StatusError (type "http"), any other
// unexpected status a step.Permanent one; it carries the scrubbed response
// body as Payload (at most ErrorBodyBytes). A JSON body holding a number
// with no finite value (1e400) is a step.Permanent error naming the number
// and its path. A connection the client's egress policy refused is a
// step.Permanent *egress.RefusedError ("egress to ADDR refused by
// policy"), and a redirect it would not follow a step.Permanent
// *RedirectRefusedError wrapping the *egress.RedirectError (both type
// "egress_refused"). Every URL in an error is without its query and user
// info.
func Call(ctx context.Context, client *http.Client, r *HTTPRequest) (map[string]any, error) {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, step.Permanent(fmt.Errorf("service_call url %q is not an http(s) URL", r.URL))
	}
	if len(r.Query) > 0 {
		q := u.Query()
		for k, v := range r.Query {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	method := strings.ToUpper(r.Method)
	if method == "" {
		method = http.MethodGet
		if r.HasBody {
			method = http.MethodPost
		}
	}
	var body io.Reader
	if r.HasBody {
		b, err := json.Marshal(r.Body)
		if err != nil {
			return nil, step.Permanent(fmt.Errorf("service_call body: %w", err))
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, step.Permanent(fmt.Errorf("service_call: %w", err))
	}
	if r.HasBody {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "starflow")
	if r.Propagator != nil {
		r.Propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	if r.IdempotencyKey != "" {
		req.Header.Set("Idempotency-Key", r.IdempotencyKey)
	}
	if r.FencingToken != "" {
		req.Header.Set("Starflow-Fencing-Token", r.FencingToken)
	}
	resp, err := client.Do(req)
	if err != nil {
		var refused *egress.RefusedError
		if errors.As(err, &refused) {
			return nil, step.Permanent(refused)
		}
		var redirect *egress.RedirectError
		if errors.As(err, &redirect) {
			return nil, step.Permanent(&RedirectRefusedError{Method: method, URL: redactURL(u), Err: redirect})
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL is said below, without its query
		}
		return nil, failed(ctx, method, redactURL(u), err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, failed(ctx, method, redactURL(u), fmt.Errorf("reading response: %w", err))
	}
	if len(raw) > MaxResponseBytes {
		return nil, step.Permanent(fmt.Errorf("%s %s: response body exceeds %d bytes", method, redactURL(u), MaxResponseBytes))
	}
	if !expected(resp.StatusCode, r.ExpectStatus) {
		se := &StatusError{
			Method:  method,
			URL:     redactURL(u),
			Status:  resp.StatusCode,
			Body:    snippet(r.Redactor, raw),
			Payload: errorPayload(r.Redactor, resp.Header.Get("Content-Type"), raw),
		}
		if se.Retryable() {
			return nil, se
		}
		return nil, step.Permanent(se)
	}
	headers := map[string]any{}
	for k, vs := range resp.Header {
		headers[strings.ToLower(k)] = strings.Join(vs, ", ")
	}
	decoded, err := decodeBody(resp.Header.Get("Content-Type"), raw)
	if err != nil {
		// The service answered, with a number no float64 holds: a retry
		// with the same Idempotency-Key would get the same answer back.
		return nil, step.Permanent(fmt.Errorf("%s %s answered %d with a JSON body whose %w", method, redactURL(u), resp.StatusCode, err))
	}
	return map[string]any{
		"status":  int64(resp.StatusCode),
		"headers": headers,
		"body":    decoded,
		"request": sentRequest(r.Redactor, req),
	}, nil
}

// failed is the error of a request that got no answer or whose answer
// could not be read: a *NetworkError, unless ctx has ended (a step's
// timeout, the run stopping) — then err, which holds ctx's cause, is
// returned wrapped as it is, for the engine to see the context's end.
func failed(ctx context.Context, method, where string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s: %w", method, where, err)
	}
	return &NetworkError{Method: method, URL: where, Err: err}
}

func expected(status int, want []int) bool {
	if len(want) == 0 {
		return status >= 200 && status < 300
	}
	return slices.Contains(want, status)
}

// decodeBody is a response body as a step output: parsed when the
// Content-Type says JSON and it parses, else the text. A JSON body with a
// number that has no finite value (1e400) is an error (a
// *jsonvalue.RangeError), never ±Inf.
func decodeBody(contentType string, raw []byte) (any, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		v, err := jsonvalue.Decode(raw)
		if err == nil {
			return v, nil
		}
		if errors.Is(err, jsonvalue.ErrNonFinite) {
			return nil, err
		}
	}
	return string(raw), nil
}

// snippet is the start of a response body for an error message: scrubbed
// of secrets first (a cut must never keep half of one), then cut to
// SnippetBytes at a character boundary.
func snippet(red *redact.Redactor, b []byte) string {
	s := strings.TrimSpace(red.String(string(b)))
	if len(s) <= SnippetBytes {
		return s
	}
	cut := SnippetBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// redactURL drops the query string and user info (they often carry
// credentials) from URLs written into errors.
func redactURL(u *url.URL) string {
	c := *u
	c.User = nil
	c.RawQuery = ""
	return c.String()
}
