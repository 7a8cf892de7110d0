package api

import "testing"

func TestProblemErrorSaysWhatIsInvalid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p    Problem
		want string
	}{
		{Problem{Title: "Not Found", Status: 404}, "Not Found"},
		{Problem{Title: "Conflict", Detail: "run r already ended succeeded"}, "run r already ended succeeded"},
		{Problem{Detail: "validation failed", Errors: []ProblemError{{Message: "expected number <= 1e+06", Location: "body.priority", Value: 99999999999.0}}},
			"validation failed: body.priority: expected number <= 1e+06 (got 99999999999)"},
		{Problem{Detail: "validation failed", Errors: []ProblemError{{Message: "expected length <= 200", Location: "body.name"}, {Message: "required", Location: "body.role"}}},
			"validation failed: body.name: expected length <= 200; body.role: required"},
		// The whole body is not echoed; a part the detail says is not repeated.
		{Problem{Detail: "validation failed", Errors: []ProblemError{{Message: "unexpected end of JSON input", Location: "body", Value: `{"a":`}}},
			"validation failed: body: unexpected end of JSON input"},
		{Problem{Detail: "the request body's number 1e400 at $.x is out of range; nothing changed", Errors: []ProblemError{{Message: "number 1e400 at $.x is out of range", Location: "body.x", Value: "1e400"}}},
			"the request body's number 1e400 at $.x is out of range; nothing changed"},
	} {
		if got := c.p.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}
