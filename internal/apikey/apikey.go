// Package apikey makes and checks the text of API keys. A key is "sf_"
// followed by 43 base64url characters (32 random bytes); the store keeps
// only its SHA-256 (hex), so a leaked database holds no usable key. A
// key carries 256 bits of entropy, so an unsalted fast hash is enough
// (as GitHub's and Stripe's tokens): there is nothing to brute-force.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Prefix starts every key, so a key is recognisable in a leak scanner.
const Prefix = "sf_"

// textLen is the length of a key: the prefix and 43 base64url characters.
const textLen = len(Prefix) + 43

// New returns a fresh key and its hash.
func New() (key, hash string) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	key = Prefix + base64.RawURLEncoding.EncodeToString(b[:])
	return key, Hash(key)
}

// Hash is the key_hash of a key: SHA-256 of its text, lower-case hex.
func Hash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// WellFormed reports whether s has the shape of a key (prefix, length,
// alphabet), so a malformed credential is refused without a store read.
func WellFormed(s string) bool {
	if len(s) != textLen || !strings.HasPrefix(s, Prefix) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s[len(Prefix):])
	return err == nil
}
