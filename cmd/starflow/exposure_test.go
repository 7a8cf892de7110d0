package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// get answers the status of GET url with key ("" none).
func get(t *testing.T, c *http.Client, url, key string) int {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestServerExposure: a non-loopback --addr is refused while no API key
// exists; --insecure serves it anyway and says so at start and for every
// request without a key; once a key exists the address is served and
// the API (and /metrics, unless --metrics-public) needs the key.
func TestServerExposure(t *testing.T) {
	dir := t.TempDir()
	r := starflowCmd(t, dir, nil, "server", "--db", "t.db", "--addr", "0.0.0.0:0")
	if r.code == 0 || !strings.Contains(r.stderr, "not a loopback address and no API key exists") {
		t.Fatalf("server on 0.0.0.0 without keys: exit %d, %q; want a refusal", r.code, r.stderr)
	}

	open := startDaemon(t, dir, nil, "server", "--db", "t.db", "--addr", "0.0.0.0:0", "--insecure")
	url := open.waitStarted(t)
	if !strings.Contains(open.stderr.String(), "WARNING: --insecure") {
		t.Errorf("--insecure said nothing at start:\n%s", open.stderr.String())
	}
	if code := get(t, http.DefaultClient, url+"/api/runs", ""); code != 200 {
		t.Errorf("--insecure without keys: GET /api/runs %d, want 200", code)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(open.stderr.String(), "INSECURE: request served without authentication") {
		if time.Now().After(deadline) {
			t.Fatalf("no warning for a request served without a key:\n%s", open.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	open.stop(t)

	k := starflowCmd(t, dir, nil, "keys", "create", "--name", "ops", "--role", "viewer", "--workspace", "default", "--db", "t.db")
	key := strings.TrimSpace(k.stdout)
	if k.code != 0 || key == "" {
		t.Fatalf("keys create: %d %q", k.code, k.stderr)
	}
	keyed := startDaemon(t, dir, nil, "server", "--db", "t.db", "--addr", "0.0.0.0:0")
	url = keyed.waitStarted(t)
	for _, c := range []struct {
		path, key string
		want      int
	}{
		{"/api/runs", "", 401}, {"/api/runs", key, 200}, {"/metrics", "", 401}, {"/metrics", key, 200},
		{"/healthz", "", 200}, {"/readyz", "", 200}, {"/openapi.json", "", 200},
	} {
		if code := get(t, http.DefaultClient, url+c.path, c.key); code != c.want {
			t.Errorf("keys exist: GET %s (key %v): %d, want %d", c.path, c.key != "", code, c.want)
		}
	}
	keyed.stop(t)

	public := startDaemon(t, dir, nil, "server", "--db", "t.db", "--metrics-public")
	url = public.waitStarted(t)
	if code := get(t, http.DefaultClient, url+"/metrics", ""); code != 200 {
		t.Errorf("--metrics-public: GET /metrics without a key %d, want 200", code)
	}
	public.stop(t)
}

// TestServerTLS: --tls-cert and --tls-key serve HTTPS; a missing key
// file stops the server at start naming it.
func TestServerTLS(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	r := starflowCmd(t, dir, nil, "server", "--db", "t.db", "--tls-cert", cert)
	if r.code == 0 || !strings.Contains(r.stderr, "--tls-key") {
		t.Errorf("--tls-cert without --tls-key: exit %d, %q", r.code, r.stderr)
	}
	srv := startDaemon(t, dir, nil, "server", "--db", "t.db", "--addr", "127.0.0.1:0", "--tls-cert", cert, "--tls-key", key)
	srv.waitStarted(t)
	m := regexp.MustCompile(`listening on (https://\S+)`).FindStringSubmatch(srv.stderr.String())
	if m == nil {
		t.Fatalf("no https listening line:\n%s", srv.stderr.String())
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if code := get(t, c, m[1]+"/healthz", ""); code != 200 {
		t.Errorf("GET %s/healthz over TLS: %d", m[1], code)
	}
	srv.stop(t)
}

// selfSigned writes a certificate for 127.0.0.1 and its key as PEM files.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "starflow test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}
