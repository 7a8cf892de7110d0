package webhook

import (
	"bytes"
	"strings"
	"testing"
)

// The vectors were computed with openssl, not with this package:
//
//	printf 'starflow-webhook-v1\0%s\0%s\0%s' default orders 3 | openssl dgst -sha256 -mac HMAC -macopt hexkey:0707…07
//	printf '{"order": 7}' | openssl dgst -sha256 -hmac "$SECRET"
const (
	vectorSecret    = "sfwh_d7a696d2ed9de5bdbd3778b312ba60264b5f5066745a6694e1ec15e06e9884d2"
	vectorSignature = "sha256=1301ee1959fbd4272e84c90431b1d35f6061ca579cbe8e8173a3170ad2177cee"
	vectorBody      = `{"order": 7}`
)

var serverKey = bytes.Repeat([]byte{7}, 32)

func TestSecretMatchesOpenSSL(t *testing.T) {
	if got := Secret(serverKey, "default", "orders", 3); got != vectorSecret {
		t.Fatalf("Secret = %s, want %s", got, vectorSecret)
	}
	if got := Sign(vectorSecret, []byte(vectorBody)); got != vectorSignature {
		t.Fatalf("Sign = %s, want %s", got, vectorSignature)
	}
}

// TestSecretNamesItsWebhook: every part of the name changes the secret,
// and the NUL separators keep "ab"+"c" apart from "a"+"bc".
func TestSecretNamesItsWebhook(t *testing.T) {
	base := Secret(serverKey, "default", "orders", 3)
	others := map[string]string{
		"another key":        Secret(bytes.Repeat([]byte{8}, 32), "default", "orders", 3),
		"another workspace":  Secret(serverKey, "other", "orders", 3),
		"another workflow":   Secret(serverKey, "default", "order", 3),
		"another generation": Secret(serverKey, "default", "orders", 4),
		"shifted separator":  Secret(serverKey, "defaulto", "rders", 3),
	}
	for what, s := range others {
		if s == base {
			t.Errorf("%s gives the same secret", what)
		}
		if !strings.HasPrefix(s, SecretPrefix) || len(s) != len(SecretPrefix)+64 {
			t.Errorf("%s: secret %q is not sfwh_ and 64 hex digits", what, s)
		}
	}
}

func TestVerify(t *testing.T) {
	body := []byte(vectorBody)
	cases := []struct {
		header string
		ok     bool
	}{
		{vectorSignature, true},
		{"  " + vectorSignature + " ", true},
		{"SHA256=" + strings.ToUpper(strings.TrimPrefix(vectorSignature, "sha256=")), true},
		{"", false},
		{"sha256=", false},
		{strings.TrimPrefix(vectorSignature, "sha256="), false},                                    // no prefix
		{"sha1=" + strings.TrimPrefix(vectorSignature, "sha256="), false},                          // another algorithm
		{vectorSignature[:len(vectorSignature)-1], false},                                          // short
		{vectorSignature + "0", false},                                                             // long
		{vectorSignature[:len(vectorSignature)-1] + "0", false},                                    // one digit off
		{"sha256=" + strings.Repeat("zz", 32), false},                                              // not hex
		{Sign(Secret(serverKey, "default", "orders", 2), body), false},                             // the previous generation
		{Sign(vectorSecret, []byte(`{"order": 8}`)), false},                                        // another body
		{Sign(vectorSecret, []byte(vectorBody+"\n")), false},                                       // the body re-encoded
		{"sha256=" + strings.Repeat("0", 64) + "," + vectorSignature, false},                       // a list
		{vectorSignature + "\x00", false},                                                          // NUL
		{strings.Replace(vectorSignature, "sha256=", "sha256= ", 1)[:len(vectorSignature)], false}, // inner space
	}
	for _, c := range cases {
		if got := Verify(vectorSecret, body, c.header); got != c.ok {
			t.Errorf("Verify(%q) = %v, want %v", c.header, got, c.ok)
		}
	}
}

// FuzzVerify: no header but the body's own signature verifies, and
// nothing panics.
func FuzzVerify(f *testing.F) {
	f.Add([]byte(vectorBody), vectorSignature)
	f.Add([]byte(""), "sha256=")
	f.Add([]byte("{}"), "SHA256="+strings.Repeat("A", 64))
	f.Fuzz(func(t *testing.T, body []byte, header string) {
		want := Sign(vectorSecret, body)
		ok := Verify(vectorSecret, body, header)
		if ok != strings.EqualFold(strings.TrimSpace(header), want) {
			t.Fatalf("Verify(%q) = %v for a body whose signature is %s", header, ok, want)
		}
	})
}
