// Package waketoken signs and verifies wake tokens (SPEC §6): HMAC-SHA256
// capabilities over (run id, wait id, expiry, key id) that resume one
// specific durable wait.
//
// A token is "v1.<payload>.<mac>", both parts base64url without padding:
// payload is the JSON {"r": run id, "w": wait id, "e": expiry (Unix
// seconds), "k": key id} and mac the HMAC-SHA256 of "v1.<payload>" under
// the key named by "k". Several keys may verify at once (rotation); the
// first of a ring signs. The store keeps only Hash(token).
//
// Keys come from STARFLOW_WAKE_KEYS (ParseKeys) or from a key file
// (ReadKeyFile, LoadOrCreateKeyFile: mode 0600, never in a database
// table); stores keep only a key's id and Fingerprint.
//
// Import rule: standard library and starflowtype only.
package waketoken

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

// Version is the token format prefix.
const Version = "v1"

// Limits of keys and tokens.
const (
	// MinSecretLength is the shortest key secret accepted (bytes).
	MinSecretLength = 16
	// SecretLength is the length of generated secrets (bytes).
	SecretLength = 32
	// MaxTokenLength bounds what Verify reads (characters).
	MaxTokenLength = 2048
)

// EnvVar names the environment variable holding the key ring
// ("kid:base64secret,kid2:base64secret"; the first signs).
const EnvVar = "STARFLOW_WAKE_KEYS"

// Key is one HMAC-SHA256 signing key.
type Key struct {
	ID     string // [A-Za-z0-9_.-]+, at most 64 characters
	Secret []byte // at least MinSecretLength bytes
}

// Claims is what a verified token says.
type Claims struct {
	RunID  string
	WaitID string
	Expiry time.Time // UTC, whole seconds
	KeyID  string
}

// ErrUnknownKey: the token names a key the ring does not hold. It wraps
// starflowtype.ErrTokenInvalid; a caller whose ring may be stale reloads
// it and verifies again.
var ErrUnknownKey = fmt.Errorf("signed by an unknown key: %w", starflowtype.ErrTokenInvalid)

type payload struct {
	R string `json:"r"`
	W string `json:"w"`
	E int64  `json:"e"`
	K string `json:"k"`
}

var b64 = base64.RawURLEncoding

// Sign returns the token of (runID, waitID, expiry) signed with k. The
// expiry is truncated to the second.
func Sign(k Key, runID, waitID string, expiry time.Time) string {
	p, _ := json.Marshal(payload{R: runID, W: waitID, E: expiry.Unix(), K: k.ID}) // strings and an int: cannot fail
	signed := Version + "." + b64.EncodeToString(p)
	return signed + "." + b64.EncodeToString(mac(k.Secret, signed))
}

func mac(secret []byte, msg string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// Verify checks token against the keys and the time now. Errors wrap
// starflowtype.ErrTokenInvalid (malformed, forged, unknown key —
// ErrUnknownKey) or starflowtype.ErrWaitClosed (expired: the signature is
// good, the expiry passed). The MAC is compared in constant time.
func Verify(keys []Key, token string, now time.Time) (Claims, error) {
	invalid := func(why string) (Claims, error) {
		return Claims{}, fmt.Errorf("wake token %s: %w", why, starflowtype.ErrTokenInvalid)
	}
	if len(token) > MaxTokenLength {
		return invalid("is too long")
	}
	ver, rest, ok := strings.Cut(token, ".")
	if !ok || ver != Version {
		return invalid("is malformed (not a " + Version + " token)")
	}
	pb64, sb64, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(sb64, ".") {
		return invalid("is malformed")
	}
	raw, err := b64.DecodeString(pb64)
	if err != nil {
		return invalid("is malformed (payload)")
	}
	sig, err := b64.DecodeString(sb64)
	if err != nil || len(sig) != sha256.Size {
		return invalid("is malformed (signature)")
	}
	var p payload
	if err := json.Unmarshal(raw, &p); err != nil || p.R == "" || p.W == "" || p.K == "" {
		return invalid("is malformed (claims)")
	}
	var key *Key
	for i := range keys {
		if keys[i].ID == p.K {
			key = &keys[i]
			break
		}
	}
	if key == nil {
		return Claims{}, fmt.Errorf("wake token: key %q: %w", p.K, ErrUnknownKey)
	}
	if !hmac.Equal(sig, mac(key.Secret, Version+"."+pb64)) {
		return invalid("signature does not match")
	}
	c := Claims{RunID: p.R, WaitID: p.W, Expiry: time.Unix(p.E, 0).UTC(), KeyID: p.K}
	if !now.Before(c.Expiry) {
		return c, fmt.Errorf("wake token expired at %s: %w", c.Expiry.Format(time.RFC3339), starflowtype.ErrWaitClosed)
	}
	return c, nil
}

// fingerprintLabel is what Fingerprint signs. It does not start with
// Version+".", so a fingerprint is never the MAC of a token.
const fingerprintLabel = "starflow wake-key fingerprint\x00"

// Fingerprint identifies k without revealing its secret: the hex
// HMAC-SHA256, under k's secret, of a fixed label and k's id (64
// characters). It is what a store keeps of a key (wake_keys.fingerprint),
// so that processes signing with different secrets under one key id are
// detected; it is useless for signing tokens (a token's MAC covers
// "v1.<payload>", never the label).
func Fingerprint(k Key) string {
	return hex.EncodeToString(mac(k.Secret, fingerprintLabel+k.ID))
}

// Hash is the hex sha256 of a token: what workflow_waits.token_hash holds.
func Hash(token string) string {
	s := sha256.Sum256([]byte(token))
	return hex.EncodeToString(s[:])
}

// Generate returns a key with a random SecretLength-byte secret.
func Generate(id string) (Key, error) {
	if err := checkID(id); err != nil {
		return Key{}, err
	}
	b := make([]byte, SecretLength)
	if _, err := rand.Read(b); err != nil {
		return Key{}, fmt.Errorf("generate wake key: %w", err)
	}
	return Key{ID: id, Secret: b}, nil
}

func checkID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("wake key id %q: must be 1 to 64 characters", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return fmt.Errorf("wake key id %q: only letters, digits, '_', '.' and '-' are allowed", id)
		}
	}
	return nil
}

// ParseKeys reads a key ring in the STARFLOW_WAKE_KEYS format:
// comma-separated "kid:secret" entries, the secret in base64 (standard or
// URL alphabet, padded or not) of at least MinSecretLength bytes. The
// first key signs; all verify. Errors name the entry (by position and id,
// never the secret).
func ParseKeys(s string) ([]Key, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New(EnvVar + " is empty")
	}
	return parseEntries(EnvVar, strings.Split(s, ","))
}

// parseEntries parses "kid:secret" entries; errors name source and the
// entry (by position and id, never the secret).
func parseEntries(source string, entries []string) ([]Key, error) {
	var out []Key
	seen := map[string]bool{}
	for i, entry := range entries {
		entry = strings.TrimSpace(entry)
		id, secret, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("%s entry %d: want kid:base64secret", source, i+1)
		}
		if err := checkID(id); err != nil {
			return nil, fmt.Errorf("%s entry %d: %w", source, i+1, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("%s entry %d: key id %q is listed twice", source, i+1, id)
		}
		seen[id] = true
		b, err := decodeSecret(secret)
		if err != nil {
			return nil, fmt.Errorf("%s entry %d (key %q): the secret is not base64", source, i+1, id)
		}
		if len(b) < MinSecretLength {
			return nil, fmt.Errorf("%s entry %d (key %q): the secret is %d bytes; at least %d are required", source, i+1, id, len(b), MinSecretLength)
		}
		out = append(out, Key{ID: id, Secret: b})
	}
	return out, nil
}

func decodeSecret(s string) ([]byte, error) {
	s = strings.TrimRight(strings.TrimSpace(s), "=")
	if s == "" {
		return nil, errors.New("empty")
	}
	if b, err := base64.RawStdEncoding.DecodeString(s); err == nil {
		return b, nil
	}
	return base64.RawURLEncoding.DecodeString(s)
}

// Format writes keys in the STARFLOW_WAKE_KEYS format (standard base64).
func Format(keys []Key) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k.ID + ":" + base64.StdEncoding.EncodeToString(k.Secret)
	}
	return strings.Join(parts, ",")
}
