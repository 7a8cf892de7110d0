// Package webhook derives the per-workflow secrets of webhook triggers
// and checks the signatures senders put on their deliveries (POST
// /api/workflows/{name}/trigger; docs/api.md, "Webhook triggers").
//
// No secret is stored: a workflow's secret is derived from the server's
// current wake-token signing key (internal/waketoken) and what names the
// webhook — its workspace, its workflow and its generation, which an
// admin's rotation bumps:
//
//	raw    = HMAC-SHA256(server key secret, "starflow-webhook-v1" 0x00 workspace 0x00 workflow 0x00 generation)
//	secret = "sfwh_" + hex(raw)
//
// (generation in decimal). The secret is handed to the sender as text,
// and the sender signs the raw request body with that text as the HMAC
// key, the way GitHub, Stripe-style and most other webhook senders do:
//
//	X-Starflow-Signature-256: sha256=<hex of HMAC-SHA256(secret, body)>
//
// Import rule: the standard library only.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// Label is the derivation's domain separator: a secret derived for
// webhooks can never equal a MAC the same key makes for anything else
// (wake tokens, key fingerprints).
const Label = "starflow-webhook-v1"

// SecretPrefix starts every secret, so secret scanners and people can
// tell one apart.
const SecretPrefix = "sfwh_"

// SignaturePrefix starts a signature header's value.
const SignaturePrefix = "sha256="

// Secret is the secret of the webhook (workspace, workflow, generation)
// under the server key serverKey: SecretPrefix and 64 hex digits. The
// parts are joined with NUL bytes, which no workspace or workflow name
// holds (the API refuses NUL in paths and queries; workflow names are
// [a-z0-9][a-z0-9_-]*).
func Secret(serverKey []byte, workspace, workflow string, generation int64) string {
	h := hmac.New(sha256.New, serverKey)
	h.Write([]byte(Label))
	for _, part := range []string{workspace, workflow, strconv.FormatInt(generation, 10)} {
		h.Write([]byte{0})
		h.Write([]byte(part))
	}
	return SecretPrefix + hex.EncodeToString(h.Sum(nil))
}

// Sign is the signature header value of body under secret:
// "sha256=" and the lower-case hex of HMAC-SHA256(secret, body).
func Sign(secret string, body []byte) string {
	return SignaturePrefix + hex.EncodeToString(mac(secret, body))
}

func mac(secret string, body []byte) []byte {
	h := hmac.New(sha256.New, []byte(secret))
	h.Write(body)
	return h.Sum(nil)
}

// Verify reports whether header (a signature header's value,
// "sha256=<64 hex digits>", the digits in either case, surrounding
// spaces ignored) is the signature of body under secret. The MAC is
// always computed and compared in constant time, so a malformed or
// missing header costs what a wrong one does.
func Verify(secret string, body []byte, header string) bool {
	want := mac(secret, body)
	got, ok := parse(header)
	if !ok {
		got = make([]byte, sha256.Size)
	}
	return hmac.Equal(want, got) && ok
}

// parse reads "sha256=<hex>" into the 32 bytes of the MAC.
func parse(header string) ([]byte, bool) {
	v := strings.TrimSpace(header)
	if len(v) != len(SignaturePrefix)+2*sha256.Size || !strings.EqualFold(v[:len(SignaturePrefix)], SignaturePrefix) {
		return nil, false
	}
	b, err := hex.DecodeString(v[len(SignaturePrefix):])
	if err != nil {
		return nil, false
	}
	return b, true
}
