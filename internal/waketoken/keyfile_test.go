package waketoken

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/starflow/starflow/starflowtype"
)

func perm(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// A missing key file is created owner-only with one generated key, which
// later reads return; concurrent creators all get that one key.
func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "starflow.db.wakekeys")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created int
		ids     = map[string]int{}
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			keys, made, err := LoadOrCreateKeyFile(path, nil)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if made {
				created++
			}
			if len(keys) != 1 || len(keys[0].Secret) != SecretLength {
				t.Errorf("keys = %d, secret %d bytes", len(keys), len(keys[0].Secret))
				return
			}
			ids[keys[0].ID+"/"+hex.EncodeToString(keys[0].Secret)]++
		}()
	}
	wg.Wait()
	if created != 1 || len(ids) != 1 {
		t.Fatalf("created %d times, %d distinct keys; want one file, one key", created, len(ids))
	}
	if m := perm(t, path); m != KeyFileMode {
		t.Fatalf("key file mode %04o, want %04o", m, KeyFileMode)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp-*"))
	if len(left) > 0 {
		t.Fatalf("temporary files left behind: %v", left)
	}
	keys, made, err := LoadOrCreateKeyFile(path, nil)
	if err != nil || made || len(keys) != 1 {
		t.Fatalf("second load: %v made=%v %v", keys, made, err)
	}
	if !strings.HasPrefix(keys[0].ID, "k") || checkID(keys[0].ID) != nil {
		t.Fatalf("generated id %q", keys[0].ID)
	}
}

// A key file other users can read is made owner-only when read, with a
// warning naming it.
func TestReadKeyFileTightensMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("k1:"+Format([]Key{k1})[3:]+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	keys, err := ReadKeyFile(path, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil || len(keys) != 1 || !bytes.Equal(keys[0].Secret, k1.Secret) {
		t.Fatalf("ReadKeyFile = %v, %v", keys, err)
	}
	if m := perm(t, path); m != 0o600 {
		t.Fatalf("mode after read %04o, want 0600", m)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "file="+path) {
		t.Fatalf("no warning naming the file: %s", logs.String())
	}
}

func TestReadKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	good := Format([]Key{k1})
	cases := []struct{ name, text, want string }{
		{"empty", "# only a comment\n\n", "holds no key"},
		{"malformed", "# c\n" + good + "\nnot-a-key\n", "line 3 entry 1: want kid:base64secret"},
		{"short secret", "k9:AAAA\n", `line 1 entry 1 (key "k9"): the secret is 3 bytes`},
		{"duplicate", good + "\n" + good + "\n", `key id "k1" is already on line 1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_"))
			if err := os.WriteFile(path, []byte(c.text), KeyFileMode); err != nil {
				t.Fatal(err)
			}
			_, err := ReadKeyFile(path, nil)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, path, c.want)
			}
			if strings.Contains(err.Error(), good[3:]) {
				t.Fatalf("the error shows a secret: %v", err)
			}
		})
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v, want fs.ErrNotExist", err)
	}
	if _, err := ReadKeyFile(dir, nil); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("a folder: %v", err)
	}
}

// Several entries: one per line or comma separated; the first signs.
func TestReadKeyFileRing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	text := "# ring\n" + Format([]Key{k2}) + "\n\n  " + Format([]Key{k1, {ID: "k3", Secret: bytes.Repeat([]byte{3}, 16)}}) + "  \n"
	if err := os.WriteFile(path, []byte(text), KeyFileMode); err != nil {
		t.Fatal(err)
	}
	keys, err := ReadKeyFile(path, nil)
	if err != nil || len(keys) != 3 || keys[0].ID != "k2" || keys[1].ID != "k1" || keys[2].ID != "k3" {
		t.Fatalf("ReadKeyFile = %v, %v", keys, err)
	}
}

// AddToKeyFile creates the file (the first key signs), then appends only
// the keys it lacks (the file's first key keeps signing), and refuses a
// known id with another secret.
func TestAddToKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	added, err := AddToKeyFile(path, []Key{k1}, nil)
	if err != nil || len(added) != 1 {
		t.Fatalf("create: %v %v", added, err)
	}
	if m := perm(t, path); m != KeyFileMode {
		t.Fatalf("mode %04o", m)
	}
	if added, err = AddToKeyFile(path, []Key{k2, k1}, nil); err != nil || len(added) != 1 || added[0] != "k2" {
		t.Fatalf("add: %v %v", added, err)
	}
	keys, err := ReadKeyFile(path, nil)
	if err != nil || len(keys) != 2 || keys[0].ID != "k1" || keys[1].ID != "k2" {
		t.Fatalf("after add: %v %v", keys, err)
	}
	if m := perm(t, path); m != KeyFileMode {
		t.Fatalf("mode after replace %04o", m)
	}
	if _, err := AddToKeyFile(path, []Key{{ID: "k1", Secret: k2.Secret}}, nil); err == nil {
		t.Fatal("a known id with another secret: no error")
	}
}

// A fingerprint names a key without being usable as one: a token signed
// by the key does not verify under a key made of the fingerprint (raw or
// hex-decoded), and fingerprints differ by secret and by id.
func TestFingerprint(t *testing.T) {
	fp := Fingerprint(k1)
	if len(fp) != 64 || fp != Fingerprint(k1) {
		t.Fatalf("fingerprint %q not stable 64-hex", fp)
	}
	if fp == Fingerprint(k2) || fp == Fingerprint(Key{ID: "other", Secret: k1.Secret}) {
		t.Fatal("fingerprints collide across secrets or ids")
	}
	if strings.Contains(fp, hex.EncodeToString(k1.Secret)) {
		t.Fatal("the fingerprint holds the secret")
	}
	now := time.Unix(1_800_000_000, 0)
	tok := Sign(k1, "run", "wait", now.Add(time.Hour))
	raw, _ := hex.DecodeString(fp)
	for _, secret := range [][]byte{[]byte(fp), raw} {
		if _, err := Verify([]Key{{ID: k1.ID, Secret: secret}}, tok, now); !errors.Is(err, starflowtype.ErrTokenInvalid) {
			t.Fatalf("a key made of the fingerprint verified a token: %v", err)
		}
	}
}
