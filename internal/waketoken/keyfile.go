package waketoken

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// KeyFileMode is the mode of a key file: only its owner may read or write
// it. A key file holds the secrets that sign wake tokens; whoever reads it
// can wake any wait.
const KeyFileMode fs.FileMode = 0o600

// maxKeyFileSize bounds what ReadKeyFile reads (bytes): a ring is a few
// lines.
const maxKeyFileSize = 1 << 20

// keyFileHeader opens every key file Starflow writes.
const keyFileHeader = `# Starflow wake-token keys: the HMAC-SHA256 secrets that sign and verify
# wake tokens. Whoever can read this file can wake any wait: keep it mode
# 0600, owned by the user that runs starflow, and never commit it.
# One key per line, kid:base64secret (the STARFLOW_WAKE_KEYS format); the
# first key signs, every key verifies; lines starting with # are comments.
# To rotate: add a new key (new id) on the first line, restart the
# processes, and remove the old key once the tokens it signed have expired.
`

// NewKeyID returns a fresh key id for a generated key: "k", the UTC date
// and 8 random hex digits (e.g. "k20260102-1a2b3c4d"). A regenerated key
// never reuses the id of a lost one.
func NewKeyID() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "k" + time.Now().UTC().Format("20060102") + "-" + hex.EncodeToString(b[:])
}

// ReadKeyFile reads the key ring in the file at path. Format: one
// "kid:base64secret" entry per line (commas may also separate entries on
// one line), as in STARFLOW_WAKE_KEYS; blank lines and lines starting
// with '#' are ignored; the first key signs, all verify.
//
// A file that group or others may access is made owner-only (KeyFileMode
// bits cleared for them) with a warning on log naming it; when that is not
// possible (the file belongs to another user, a read-only mount) the file
// is refused with an error saying so: its secrets may already be known.
//
// Errors: fs.ErrNotExist (wrapped) when there is no file; a file that is
// not a regular file, holds no key, or has a malformed entry (named by
// line and key id, never by secret).
func ReadKeyFile(path string, log *slog.Logger) ([]Key, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("wake key file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("wake key file: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("wake key file %s is not a regular file", path)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 && runtime.GOOS != "windows" {
		want := mode &^ 0o077
		if err := f.Chmod(want); err != nil {
			return nil, fmt.Errorf("wake key file %s has mode %04o (other users can read it) and cannot be made owner-only (%v): "+
				"refused; make it mode 0600 and owned by this user, and replace its keys if others may have read them", path, mode, err)
		}
		if log != nil {
			log.Warn("wake key file was readable by other users; made it owner-only (replace its keys if others may have read them)",
				"file", path, "from", fmt.Sprintf("%04o", mode), "to", fmt.Sprintf("%04o", want))
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, maxKeyFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("wake key file %s: %w", path, err)
	}
	if len(b) > maxKeyFileSize {
		return nil, fmt.Errorf("wake key file %s is larger than %d bytes", path, maxKeyFileSize)
	}
	keys, err := parseKeyFile(path, b)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("wake key file %s holds no key (want lines kid:base64secret)", path)
	}
	return keys, nil
}

// parseKeyFile parses a key file's text; errors name path and line.
func parseKeyFile(path string, b []byte) ([]Key, error) {
	var out []Key
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxKeyFileSize)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("wake key file %s line %d", path, n)
		keys, err := parseEntries(where, strings.Split(line, ","))
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if first, ok := seen[k.ID]; ok {
				return nil, fmt.Errorf("%s: key id %q is already on line %d", where, k.ID, first)
			}
			seen[k.ID] = n
			out = append(out, k)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("wake key file %s: %w", path, err)
	}
	return out, nil
}

// formatKeyFile is the text of a key file holding keys, the first signing.
func formatKeyFile(keys []Key) []byte {
	var b bytes.Buffer
	b.WriteString(keyFileHeader)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s:%s\n", k.ID, base64.StdEncoding.EncodeToString(k.Secret))
	}
	return b.Bytes()
}

// LoadOrCreateKeyFile reads the ring in the file at path (ReadKeyFile)
// or, when there is none, creates it (mode KeyFileMode) holding one
// generated key with a fresh id (NewKeyID). Creation is atomic: the file
// appears complete or not at all, and of several processes creating it at
// once, one wins and all read its keys. created reports whether this call
// made the file.
func LoadOrCreateKeyFile(path string, log *slog.Logger) (keys []Key, created bool, err error) {
	keys, err = ReadKeyFile(path, log)
	if !errors.Is(err, fs.ErrNotExist) {
		return keys, false, err
	}
	k, err := Generate(NewKeyID())
	if err != nil {
		return nil, false, err
	}
	made, err := createFile(path, formatKeyFile([]Key{k}))
	if err != nil {
		return nil, false, err
	}
	if !made {
		keys, err = ReadKeyFile(path, log) // another process won
		return keys, false, err
	}
	return []Key{k}, true, nil
}

// AddToKeyFile adds keys to the key file at path: the keys whose id the
// file lacks go after its own (they verify; the file's first key still
// signs). Without a file, one is created holding keys (keys[0] signs).
// The file is replaced atomically. It returns the ids added. A key whose
// id the file holds with another secret is an error (nothing changes).
func AddToKeyFile(path string, keys []Key, log *slog.Logger) ([]string, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	have, err := ReadKeyFile(path, log)
	if errors.Is(err, fs.ErrNotExist) {
		made, err := createFile(path, formatKeyFile(keys))
		if err != nil {
			return nil, err
		}
		if made {
			ids := make([]string, len(keys))
			for i, k := range keys {
				ids[i] = k.ID
			}
			return ids, nil
		}
		have, err = ReadKeyFile(path, log) // another process made it meanwhile
	}
	if err != nil {
		return nil, err
	}
	byID := map[string]Key{}
	for _, k := range have {
		byID[k.ID] = k
	}
	var added []string
	all := have
	for _, k := range keys {
		if h, ok := byID[k.ID]; ok {
			if !bytes.Equal(h.Secret, k.Secret) {
				return nil, fmt.Errorf("wake key file %s already holds a different key with id %q", path, k.ID)
			}
			continue
		}
		byID[k.ID] = k
		all = append(all, k)
		added = append(added, k.ID)
	}
	if len(added) == 0 {
		return nil, nil
	}
	if err := replaceFile(path, formatKeyFile(all)); err != nil {
		return nil, err
	}
	return added, nil
}

// tempFile writes data to a new file of mode KeyFileMode in path's
// folder, synced, and returns its name.
func tempFile(path string, data []byte) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("wake key file %s: %w", path, err)
	}
	name := f.Name()
	err = f.Chmod(KeyFileMode) // CreateTemp makes 0600 already; say it
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
		return "", fmt.Errorf("wake key file %s: %w", path, err)
	}
	return name, nil
}

// createFile makes path hold data unless it exists: the complete file is
// linked into place (made false, no error, when path exists).
func createFile(path string, data []byte) (made bool, err error) {
	tmp, err := tempFile(path, data)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("wake key file %s: %w", path, err)
	}
	syncDir(path)
	return true, nil
}

// replaceFile replaces path with data atomically.
func replaceFile(path string, data []byte) error {
	tmp, err := tempFile(path, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("wake key file %s: %w", path, err)
	}
	syncDir(path)
	return nil
}

// syncDir makes a new name in path's folder durable (best effort).
func syncDir(path string) {
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync()
		d.Close()
	}
}
