package httpserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/workflow"
)

// bodyEnvelope is what a JSON body may hold around the capped value it
// carries (the input of an enqueue, the payload of a signal): the options
// and names beside it.
const bodyEnvelope = 64 << 10

// bodyRule says how an operation's request body is read before huma reads
// it: how large it may be, under which of the engine's caps, and whether
// its JSON numbers must be finite.
type bodyRule struct {
	// limit is the cap that bounds the body (limits.definition_bytes,
	// limits.input_bytes, limits.payload_bytes) and max its value now
	// (negative: no cap).
	limit workflow.Limit
	max   int64
	// exact: the body is the capped value itself (a definition's source, a
	// webhook delivery's input), so it may be max bytes; otherwise the
	// value sits inside a JSON object and the body may be bodyEnvelope
	// more.
	exact bool
	// json: refuse a body holding a number with no finite value (1e400)
	// with 400 naming it, as POST /wake/{token} does (huma's decoder would
	// answer only "cannot unmarshal number 1e400 into float64").
	json bool
}

// withBody makes o read its body by rule: its MaxBodyBytes, and a
// middleware (after the role and rate checks) that answers a body over
// the cap 413 naming the cap and how to raise it — huma's own answer names
// neither — and, with rule.json, a non-finite number 400.
func (s *apiServer) withBody(o huma.Operation, rule bodyRule) huma.Operation {
	switch {
	case rule.max < 0:
		o.MaxBodyBytes = 1 << 40
	case rule.exact:
		o.MaxBodyBytes = rule.max + 1
	default:
		o.MaxBodyBytes = rule.max + bodyEnvelope
	}
	read := o.MaxBodyBytes
	o.Middlewares = append(o.Middlewares, func(hctx huma.Context, next func(huma.Context)) {
		r, _ := humago.Unwrap(hctx)
		if r.Body == nil {
			next(hctx)
			return
		}
		// At most read bytes: huma refuses a body that fills its limit.
		body, err := io.ReadAll(io.LimitReader(r.Body, read))
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				_ = huma.WriteErr(s.api, hctx, http.StatusRequestTimeout, "the request body took too long to arrive")
				return
			}
			_ = huma.WriteErr(s.api, hctx, http.StatusBadRequest, "the request body could not be read: "+err.Error())
			return
		}
		if int64(len(body)) >= read {
			over := &workflow.LimitError{Limit: rule.limit, Value: read, Max: rule.max,
				Subject: fmt.Sprintf("the request body (more than %d bytes) exceeds", read-1)}
			_ = huma.WriteErr(s.api, hctx, http.StatusRequestEntityTooLarge, over.Error()+"; nothing changed")
			return
		}
		if rule.json {
			if perr := nonFinite(body); perr != nil {
				_ = huma.WriteErr(s.api, hctx, http.StatusBadRequest, "the request body's "+perr.Message+"; nothing changed", perr)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next(hctx)
	})
	return o
}

// nonFinite is the refusal of a JSON body holding a number with no finite
// value, with its place in the body (body.input.quantity); nil for any
// other body (huma answers a body that is not JSON).
func nonFinite(body []byte) *huma.ErrorDetail {
	if len(bytes.TrimSpace(body)) == 0 || !mayHoldNonFinite(body) {
		return nil
	}
	var re *jsonvalue.RangeError
	if err := jsonvalue.Validate(body); !errors.As(err, &re) {
		return nil
	}
	where := "body" + strings.TrimPrefix(re.Path, "$")
	return &huma.ErrorDetail{Location: where, Message: re.Error(), Value: re.Number}
}

// mayHoldNonFinite reports whether body could hold a number with no
// finite value: one with an exponent (a digit or '.', then e or E, then a
// digit or sign) or of more than 308 digits. Most bodies have neither and
// are not decoded twice.
func mayHoldNonFinite(body []byte) bool {
	run := 0
	for i, c := range body {
		switch {
		case '0' <= c && c <= '9':
			if run++; run > 308 {
				return true
			}
			continue
		case (c == 'e' || c == 'E') && i > 0 && i+1 < len(body):
			prev, next := body[i-1], body[i+1]
			if (prev == '.' || '0' <= prev && prev <= '9') && (next == '+' || next == '-' || '0' <= next && next <= '9') {
				return true
			}
		}
		if c != '.' {
			run = 0
		}
	}
	return false
}
