package waketoken

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

var (
	k1 = Key{ID: "k1", Secret: bytes.Repeat([]byte{1}, 32)}
	k2 = Key{ID: "k2", Secret: bytes.Repeat([]byte{2}, 32)}
)

func TestSignVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	exp := now.Add(time.Hour)
	tok := Sign(k1, "run-1", "wait-1", exp)
	if !strings.HasPrefix(tok, "v1.") || strings.Count(tok, ".") != 2 {
		t.Fatalf("token format: %s", tok)
	}
	c, err := Verify([]Key{k2, k1}, tok, now)
	if err != nil {
		t.Fatal(err)
	}
	if c.RunID != "run-1" || c.WaitID != "wait-1" || c.KeyID != "k1" || !c.Expiry.Equal(exp) {
		t.Fatalf("claims: %+v", c)
	}
	if Sign(k1, "run-1", "wait-1", exp) != tok {
		t.Fatal("signing is not deterministic")
	}
	if len(Hash(tok)) != 64 || Hash(tok) == Hash(tok+"x") {
		t.Fatal("hash")
	}
}

func TestVerifyRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	good := Sign(k1, "run-1", "wait-1", now.Add(time.Hour))
	parts := strings.Split(good, ".")
	forgedKey := Key{ID: "k1", Secret: bytes.Repeat([]byte{9}, 32)}
	otherClaims := Sign(k1, "run-2", "wait-1", now.Add(time.Hour))
	swapped := parts[0] + "." + strings.Split(otherClaims, ".")[1] + "." + parts[2]
	cases := map[string]struct {
		tok  string
		keys []Key
		want error
	}{
		"empty":            {"", []Key{k1}, starflowtype.ErrTokenInvalid},
		"garbage":          {"hello", []Key{k1}, starflowtype.ErrTokenInvalid},
		"wrong version":    {"v2." + parts[1] + "." + parts[2], []Key{k1}, starflowtype.ErrTokenInvalid},
		"extra part":       {good + ".x", []Key{k1}, starflowtype.ErrTokenInvalid},
		"bad base64":       {"v1.!!!." + parts[2], []Key{k1}, starflowtype.ErrTokenInvalid},
		"forged secret":    {Sign(forgedKey, "run-1", "wait-1", now.Add(time.Hour)), []Key{k1}, starflowtype.ErrTokenInvalid},
		"claims swapped":   {swapped, []Key{k1}, starflowtype.ErrTokenInvalid},
		"unknown key":      {Sign(k2, "run-1", "wait-1", now.Add(time.Hour)), []Key{k1}, ErrUnknownKey},
		"no keys":          {good, nil, ErrUnknownKey},
		"expired":          {Sign(k1, "run-1", "wait-1", now), []Key{k1}, starflowtype.ErrWaitClosed},
		"too long":         {good + strings.Repeat("A", MaxTokenLength), []Key{k1}, starflowtype.ErrTokenInvalid},
		"truncated mac":    {good[:len(good)-2], []Key{k1}, starflowtype.ErrTokenInvalid},
		"empty claims run": {Sign(k1, "", "wait-1", now.Add(time.Hour)), []Key{k1}, starflowtype.ErrTokenInvalid},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Verify(c.keys, c.tok, now)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	// An expired forgery is refused as forged, not as expired.
	if _, err := Verify([]Key{k1}, Sign(forgedKey, "r", "w", now.Add(-time.Hour)), now); !errors.Is(err, starflowtype.ErrTokenInvalid) {
		t.Fatalf("expired forgery: %v", err)
	}
}

func TestParseKeys(t *testing.T) {
	ring := Format([]Key{k1, k2})
	keys, err := ParseKeys(ring)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || keys[0].ID != "k1" || !bytes.Equal(keys[1].Secret, k2.Secret) {
		t.Fatalf("keys: %+v", keys)
	}
	// URL alphabet without padding is accepted too.
	if _, err := ParseKeys("a:" + strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(Format([]Key{k1})[3:]), "=")); err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"empty":        "",
		"no colon":     "abc",
		"bad id":       "a b:" + Format([]Key{k1})[3:],
		"short secret": "a:c2hvcnQ=",
		"not base64":   "a:!!!!!!!!!!!!!!!!!!!!!!!!!!!!",
		"duplicate":    ring + "," + Format([]Key{k1}),
	} {
		if _, err := ParseKeys(in); err == nil {
			t.Errorf("%s: accepted %q", name, in)
		} else if strings.Contains(err.Error(), Format([]Key{k1})[3:]) {
			t.Errorf("%s: the error shows the secret: %v", name, err)
		}
	}
}

func TestGenerate(t *testing.T) {
	a, err := Generate("default")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Generate("default")
	if len(a.Secret) != SecretLength || bytes.Equal(a.Secret, b.Secret) {
		t.Fatal("secrets are not random 32-byte values")
	}
	if _, err := Generate("bad id"); err == nil {
		t.Fatal("bad id accepted")
	}
}

// FuzzVerify: Verify never panics and accepts only what a known key
// signed, unexpired; ParseKeys never panics.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	f.Add(Sign(k1, "r", "w", now.Add(time.Hour)))
	f.Add(Sign(k2, "r", "w", now.Add(time.Hour)))
	f.Add("v1..")
	f.Add("v1.e30.AAAA")
	f.Add(Format([]Key{k1, k2}))
	f.Fuzz(func(t *testing.T, tok string) {
		c, err := Verify([]Key{k1}, tok, now)
		if err == nil {
			// Only k1's own (canonical) tokens verify: the fuzzer cannot forge a MAC.
			if Sign(k1, c.RunID, c.WaitID, c.Expiry) != tok || !now.Before(c.Expiry) {
				t.Fatalf("accepted %q", tok)
			}
		} else if !errors.Is(err, starflowtype.ErrTokenInvalid) && !errors.Is(err, starflowtype.ErrWaitClosed) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		_, _ = ParseKeys(tok)
	})
}
