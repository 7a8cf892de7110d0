package securitytest

// Issue 10 item 1: wake tokens must not be forgeable by a local user. The
// database files are owner-only, the signing secrets live only in
// STARFLOW_WAKE_KEYS or a 0600 key file, and no table — SQLite or
// PostgreSQL — holds anything a token can be signed with.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
)

// kbApproval is a workflow that waits for a signal and sends its token to
// a notify receiver (%s: the receiver's URL).
const kbApproval = `name: approval
steps:
  - id: ask
    wait:
      signal: approve
      notify: {url: "%s"}
output: "${{ steps.ask.output }}"
`

// kbTiny is a workflow with one step.
const kbTiny = `name: tiny
steps:
  - id: one
    context_set: {x: 1}
`

// kbCandidates are the secrets a local user could try from one value
// read out of a database: the value itself, and every run of 16 or more
// base64/hex characters in it, decoded every way a secret is written
// (standard and URL base64, hex) and as it stands.
func kbCandidates(v []byte) [][]byte {
	out := [][]byte{v, bytes.TrimSpace(v)}
	for _, tok := range kbTokenChars.FindAll(v, -1) {
		s := strings.TrimRight(string(tok), "=")
		out = append(out, tok)
		for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(s); err == nil {
				out = append(out, b)
			}
		}
		if b, err := hex.DecodeString(string(tok)); err == nil {
			out = append(out, b)
		}
	}
	return out
}

var kbTokenChars = regexp.MustCompile(`[A-Za-z0-9+/=_-]{16,}`)

// kbNoUsableSecret checks the cells of a database against the real key
// ring: no cell holds a secret in any encoding, and no candidate secret
// from any cell signs a token (for the wait of the notify body, under
// every key id the database names) that the ring verifies. It returns how
// many candidate tokens were tried.
func kbNoUsableSecret(t *testing.T, cells []dbCell, ring []waketoken.Key, runID, waitID string) int {
	t.Helper()
	for _, c := range cells {
		for _, k := range ring {
			for _, enc := range [][]byte{k.Secret, []byte(base64.StdEncoding.EncodeToString(k.Secret)),
				[]byte(base64.RawURLEncoding.EncodeToString(k.Secret)), []byte(hex.EncodeToString(k.Secret))} {
				if bytes.Contains(c.value, enc) {
					t.Fatalf("%s holds the secret of wake key %s", c.where, k.ID)
				}
			}
		}
	}
	ids := map[string]bool{}
	for _, c := range cells {
		if c.where == "wake_keys.id" || c.where == "workflow_waits.key_id" {
			ids[string(c.value)] = true
		}
	}
	for _, k := range ring {
		if !ids[k.ID] {
			t.Fatalf("the database does not name wake key %s (wake_keys.id, workflow_waits.key_id): %v", k.ID, ids)
		}
	}
	now := time.Now()
	tried := 0
	for _, c := range cells {
		for _, secret := range kbCandidates(c.value) {
			if len(secret) == 0 {
				continue
			}
			for id := range ids {
				tok := waketoken.Sign(waketoken.Key{ID: id, Secret: secret}, runID, waitID, now.Add(time.Hour))
				tried++
				if _, err := waketoken.Verify(ring, tok, now); !errors.Is(err, starflowtype.ErrTokenInvalid) {
					t.Fatalf("a token signed with a value of %s verifies (%v): the database holds a usable secret", c.where, err)
				}
			}
		}
	}
	return tried
}

// TestLocalUserCannotMintWakeToken: `starflow dev` on a fresh SQLite file
// keeps the database, its -wal and -shm, and the generated key file
// owner-only (0600); no table holds the signing secret in any encoding,
// and no value read from any table signs a token the server accepts —
// checked offline against the key file for every candidate, and over
// HTTP for the values that name the key (its id and fingerprint), while
// the genuine token still wakes the wait.
func TestLocalUserCannotMintWakeToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sink := newNotifySink(t)
	writeFile(t, dir, "approval.yaml", strings.Replace(kbApproval, "%s", sink.srv.URL, 1))
	runID := applyAndEnqueue(t, dir, "approval.yaml", "approval", "w.db")
	d := startStarflow(t, dir, nil, "dev", "--db", "w.db", "--addr", "127.0.0.1:0", "--poll-interval", "50ms")
	base := d.waitFor(t, listeningRe)
	body := sink.next(t)
	token, _ := body["token"].(string)
	waitID, _ := body["wait_id"].(string)
	wakeURL, _ := body["wake_url"].(string)
	if token == "" || body["run_id"] != runID || wakeURL != base+"/wake/"+token {
		t.Fatalf("notify body %v", body)
	}

	db := filepath.Join(dir, "w.db")
	keyFile := db + ".wakekeys"
	for _, name := range []string{db, db + "-wal", db + "-shm", keyFile} {
		if m := perm(t, name); m != 0o600 {
			t.Errorf("%s has mode %04o, want 0600", filepath.Base(name), m)
		}
	}
	ring, err := waketoken.ReadKeyFile(keyFile, nil)
	if err != nil || len(ring) != 1 {
		t.Fatalf("key file: %v %v", ring, err)
	}
	if _, err := waketoken.Verify(ring, token, time.Now()); err != nil {
		t.Fatalf("the notified token does not verify with the key file: %v", err)
	}

	cells := sqliteCells(t, db)
	tried := kbNoUsableSecret(t, cells, ring, runID, waitID)
	t.Logf("%d values read from %s; %d candidate tokens refused", len(cells), filepath.Base(db), tried)

	// Over HTTP: tokens signed with what wake_keys holds are refused (401)
	// and change nothing; the genuine token then wakes the wait.
	var forged []string
	for _, c := range cells {
		if strings.HasPrefix(c.where, "wake_keys.") {
			for _, secret := range kbCandidates(c.value) {
				if len(secret) > 0 {
					forged = append(forged, waketoken.Sign(waketoken.Key{ID: ring[0].ID, Secret: secret}, runID, waitID, time.Now().Add(time.Hour)))
				}
			}
		}
	}
	if len(forged) == 0 {
		t.Fatal("wake_keys holds nothing to try")
	}
	for _, tok := range forged {
		if code := kbPost(t, base+"/wake/"+tok, `{"approved": "forged"}`); code != http.StatusUnauthorized {
			t.Fatalf("a token signed with a wake_keys value: HTTP %d, want 401", code)
		}
	}
	if code := kbPost(t, wakeURL, `{"approved": "yes"}`); code != http.StatusOK {
		t.Fatalf("the genuine token: HTTP %d, want 200", code)
	}
	d.stop(t)
}

// kbPost POSTs a JSON body and returns the status code.
func kbPost(t *testing.T, u, body string) int {
	t.Helper()
	res, err := http.Post(u, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	readAll(t, res.Body)
	return res.StatusCode
}

// TestReadableDatabaseAndKeyFileAreTightened: a database file and a key
// file other users can read (0644, as older versions created them, or a
// careless copy) are made owner-only by the next command that opens them,
// with a warning naming each file, and the command still works.
func TestReadableDatabaseAndKeyFileAreTightened(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "tiny.yaml", kbTiny)
	if r := runStarflow(t, dir, nil, "run", "tiny.yaml", "--db", "w.db"); r.code != 0 {
		t.Fatalf("first run: %s", r.stderr)
	}
	db := filepath.Join(dir, "w.db")
	for _, name := range []string{db, db + ".wakekeys"} {
		if m := perm(t, name); m != 0o600 {
			t.Fatalf("%s created with mode %04o, want 0600", filepath.Base(name), m)
		}
		if err := os.Chmod(name, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runStarflow(t, dir, nil, "run", "tiny.yaml", "--db", "w.db")
	if r.code != 0 {
		t.Fatalf("run on 0644 files: exit %d\n%s", r.code, r.stderr)
	}
	for _, name := range []string{"w.db", "w.db.wakekeys"} {
		if m := perm(t, filepath.Join(dir, name)); m != 0o600 {
			t.Errorf("%s has mode %04o after the run, want 0600", name, m)
		}
		// stderr is no terminal here: the log lines are JSON.
		if !strings.Contains(r.stderr, `"level":"WARN"`) || !strings.Contains(r.stderr, `"file":"`+name+`"`) {
			t.Errorf("no warning naming %s:\n%s", name, r.stderr)
		}
	}
}

// TestPostgresKeepsNoWakeSecret: on PostgreSQL the secrets come only from
// STARFLOW_WAKE_KEYS. A worker or `starflow run` without it stops at once
// with an error naming the variable (and `run` leaves no run behind). With
// it, a run that issues a token leaves wake_keys holding the key's id and
// fingerprint only: no value of any table of the schema holds the secret
// or signs a token the ring verifies.
func TestPostgresKeepsNoWakeSecret(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	store, conn, schema := pgSchema(t, "sec_keys")

	dir := t.TempDir()
	sink := newNotifySink(t)
	writeFile(t, dir, "approval.yaml", strings.Replace(kbApproval, "%s", sink.srv.URL, 1))
	for _, args := range [][]string{
		{"worker", "--store", store},
		{"run", "approval.yaml", "--store", store},
	} {
		r := runStarflow(t, dir, nil, args...)
		if r.code == 0 || !strings.Contains(r.stderr, "STARFLOW_WAKE_KEYS") {
			t.Fatalf("starflow %s without STARFLOW_WAKE_KEYS: exit %d\n%s", args[0], r.code, r.stderr)
		}
	}
	var runs int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "workflow_runs"}.Sanitize()).Scan(&runs); err != nil || runs != 0 {
		t.Fatalf("runs left behind by a refused `starflow run`: %d %v", runs, err)
	}

	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	ring := []waketoken.Key{{ID: "prod-1", Secret: secret}}
	env := []string{"STARFLOW_WAKE_KEYS=" + waketoken.Format(ring)}
	d := startStarflow(t, dir, env, "run", "approval.yaml", "--store", store)
	body := sink.next(t)
	token, _ := body["token"].(string)
	runID, _ := body["run_id"].(string)
	waitID, _ := body["wait_id"].(string)
	if _, err := waketoken.Verify(ring, token, time.Now()); err != nil {
		t.Fatalf("the notified token does not verify with STARFLOW_WAKE_KEYS: %v", err)
	}
	cells := pgCells(t, conn, schema)
	var fp string
	for _, c := range cells {
		if c.where == "wake_keys.fingerprint" {
			fp = string(c.value)
		}
	}
	if fp != waketoken.Fingerprint(ring[0]) {
		t.Fatalf("wake_keys.fingerprint = %q, want the key's fingerprint", fp)
	}
	tried := kbNoUsableSecret(t, cells, ring, runID, waitID)
	t.Logf("%d values read from schema %s; %d candidate tokens refused", len(cells), schema, tried)

	// `starflow wake` verifies with the same ring, and only with it.
	if r := runStarflow(t, dir, nil, "wake", token, "--store", store, "--payload", `{"approved": "yes"}`); r.code == 0 || !strings.Contains(r.stderr, "STARFLOW_WAKE_KEYS") {
		t.Fatalf("wake without STARFLOW_WAKE_KEYS: exit %d\n%s", r.code, r.stderr)
	}
	if r := runStarflow(t, dir, env, "wake", token, "--store", store, "--payload", `{"approved": "yes"}`); r.code != 0 {
		t.Fatalf("wake with STARFLOW_WAKE_KEYS: exit %d\n%s", r.code, r.stderr)
	}
	if code := d.wait(t); code != 0 {
		t.Fatalf("the woken run: exit %d\n%s", code, d.stderr.String())
	}
}

// TestKeyFileOfAnotherUserRefused: a key file that other users can read and
// that this process cannot make owner-only (it belongs to another user) is
// refused, not used: its secret may already be known. The command runs as
// the unprivileged user nobody against a root-owned 0644 key file, the way
// a careless shared deployment would. Needs root to switch users (CI runs
// as root).
func TestKeyFileOfAnotherUserRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI must run this test as root (it runs starflow as the user nobody)")
		}
		t.Skip("needs root to run starflow as another user")
	}
	const nobody = 65534
	// A folder every user can enter, holding a copy of the binary and the
	// workflow; a work folder owned by nobody for the database.
	dir, err := os.MkdirTemp("", "starflow-keyowner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "starflow")
	src, err := os.ReadFile(Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, src, 0o755); err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "tiny.yaml"), []byte(kbTiny), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(work, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "shared.wakekeys")
	if err := os.WriteFile(keyFile, []byte("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keyFile, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "run", "tiny.yaml", "--db", "w.db")
	cmd.Dir = work
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + work, "STARFLOW_WAKE_KEY_FILE=" + keyFile}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("starflow run as nobody with a root-owned 0644 key file: %v, want a refusal\n%s", err, out)
	}
	for _, frag := range []string{keyFile, "0644", "cannot be made owner-only", "refused"} {
		if !strings.Contains(string(out), frag) {
			t.Errorf("the refusal does not say %q:\n%s", frag, out)
		}
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o644 {
		t.Fatalf("the key file changed: %v %v", fi.Mode(), err)
	}
	// Nothing ran on that key: the database has no run (or does not exist).
	if _, err := os.Stat(filepath.Join(work, "w.db")); err == nil {
		var n int
		queryRow(t, filepath.Join(work, "w.db"), "SELECT count(*) FROM workflow_runs", &n)
		if n != 0 {
			t.Fatalf("%d runs were created with a refused key file", n)
		}
	}
}
