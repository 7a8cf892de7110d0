package redact

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"
)

func TestRedactor(t *testing.T) {
	secret := "s3cr3t/+&= \"x\""
	r := New(secret, "")
	inputs := []string{
		"Bearer " + secret,
		base64.StdEncoding.EncodeToString([]byte(secret)),
		base64.RawURLEncoding.EncodeToString([]byte(secret)),
		"q=" + url.QueryEscape(secret),
		"/p/" + url.PathEscape(secret),
		`{"a":"s3cr3t/+&= \"x\""}`,
	}
	for _, in := range inputs {
		out := r.String(in)
		if !strings.Contains(out, Mask) || strings.Contains(out, "s3cr3t") {
			t.Errorf("%q → %q", in, out)
		}
	}
	v := r.Value(map[string]any{"k": []any{"x" + secret}, secret: 1}).(map[string]any)
	if v["k"].([]any)[0] != "x***" || v[Mask] != 1 {
		t.Errorf("value: %#v", v)
	}
	var nilR *Redactor
	if nilR.String("a") != "a" || New() != nil {
		t.Error("nil redactor")
	}
}
