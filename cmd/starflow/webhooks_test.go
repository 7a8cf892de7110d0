package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/webhook"
)

const webhookWF = `name: hooked
input_schema:
  type: object
  properties:
    ref: {type: string}
  required: [ref]
steps:
  - id: note
    context_set: {ref: "${{ input.ref }}"}
`

// TestWebhooksCLI: starflow webhooks enable|show|disable on the store and
// through a real starflow server agree (the store and the server derive
// the same secret from the same key file), a delivery signed with the
// secret the CLI printed starts a run over HTTP, a rotation or a disable
// makes the old secret fail with 401, and only an admin of the
// workflow's workspace manages it.
func TestWebhooksCLI(t *testing.T) {
	t.Parallel()
	f := newRemoteFixture(t)
	if err := os.WriteFile(filepath.Join(f.dir, "hooked.yaml"), []byte(webhookWF), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := f.local(t, "apply", "hooked.yaml"); r.code != 0 {
		t.Fatalf("apply: exit %d %s", r.code, r.stderr)
	}
	read := func(r result) api.Webhook {
		t.Helper()
		var w api.Webhook
		if r.code != 0 || json.Unmarshal([]byte(r.stdout), &w) != nil {
			t.Fatalf("exit %d, stdout %q, stderr %q; want a webhook as JSON", r.code, r.stdout, r.stderr)
		}
		return w
	}
	deliver := func(url, secret, body string) int {
		t.Helper()
		req, err := http.NewRequest("POST", url, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(api.WebhookSignatureHeader, webhook.Sign(secret, []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusAccepted {
			var tr api.WebhookTriggered
			if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || !tr.Created {
				t.Fatalf("202 with %+v (%v); want a created run", tr, err)
			}
			if r := f.local(t, "runs", "show", tr.RunID, "--json"); r.code != 0 || !strings.Contains(r.stdout, `"trigger_type": "api"`) || !strings.Contains(r.stdout, "PR-7") {
				t.Fatalf("runs show %s: exit %d %s; want the run, trigger api, with the body as input", tr.RunID, r.code, r.stdout)
			}
		}
		return resp.StatusCode
	}
	body := `{"ref": "PR-7"}`

	local := read(f.local(t, "webhooks", "enable", "hooked", "--json"))
	if local.Generation != 1 || local.URL != "/api/workflows/hooked/trigger?workspace=default" || !strings.HasPrefix(local.Secret, webhook.SecretPrefix) {
		t.Fatalf("enable on the store: %+v; want generation 1, the path, an sfwh_ secret", local)
	}
	remote := read(f.remote(t, f.admin, "webhooks", "show", "hooked", "--json"))
	if remote.Secret != local.Secret || remote.URL != f.url+local.URL {
		t.Fatalf("show through the server: %+v; want the store's secret %s at %s", remote, local.Secret, f.url+local.URL)
	}
	if got := deliver(remote.URL, local.Secret, body); got != http.StatusAccepted {
		t.Fatalf("a delivery signed with the CLI's secret: %d, want 202", got)
	}
	if got := deliver(remote.URL, local.Secret, `{"ref": 8}`); got != http.StatusUnprocessableEntity {
		t.Fatalf("a signed body the input_schema refuses: %d, want 422", got)
	}
	if got := deliver(remote.URL, "sfwh_"+strings.Repeat("0", 64), body); got != http.StatusUnauthorized {
		t.Fatalf("a wrong secret: %d, want 401", got)
	}

	text := f.remote(t, f.admin, "webhooks", "enable", "hooked")
	if text.code != 0 || !strings.Contains(text.stdout, "enabled, generation 2") || !strings.Contains(text.stdout, "url:     "+remote.URL) ||
		!strings.Contains(text.stdout, api.WebhookSignatureHeader) || strings.Contains(text.stdout, local.Secret) {
		t.Fatalf("rotate through the server: exit %d\n%s\n%s", text.code, text.stdout, text.stderr)
	}
	rotated := read(f.local(t, "webhooks", "show", "hooked", "--json"))
	if rotated.Generation != 2 || !strings.Contains(text.stdout, rotated.Secret) {
		t.Fatalf("show on the store after the rotation: %+v; want generation 2 with the secret the server printed", rotated)
	}
	if got := deliver(remote.URL, local.Secret, body); got != http.StatusUnauthorized {
		t.Fatalf("the secret before the rotation: %d, want 401", got)
	}
	if got := deliver(remote.URL, rotated.Secret, body); got != http.StatusAccepted {
		t.Fatalf("the rotated secret: %d, want 202", got)
	}

	mustCode(t, "a viewer enables", f.remote(t, f.viewer, "webhooks", "enable", "hooked"), 1, "not allowed")
	mustCode(t, "another workspace's admin reads", f.remote(t, f.other, "webhooks", "show", "hooked"), 1, "not found on the server at "+f.url)
	mustCode(t, "--workspace another than the key's", f.remote(t, f.admin, "webhooks", "show", "hooked", "--workspace", "other"), 1, "acts in workspace default")
	mustCode(t, "another workspace on the store", f.local(t, "webhooks", "show", "hooked", "--workspace", "other"), 1, "not found in this store")
	mustCode(t, "no such workflow", f.local(t, "webhooks", "enable", "nope"), 1, "not found in this store")
	mustCode(t, "no workflow given", f.local(t, "webhooks", "enable"), 1, "accepts 1 arg")

	off := f.remote(t, f.admin, "webhooks", "disable", "hooked")
	if off.code != 0 || !strings.Contains(off.stdout, "disabled, generation 2") {
		t.Fatalf("disable: exit %d %s %s", off.code, off.stdout, off.stderr)
	}
	if got := deliver(remote.URL, rotated.Secret, body); got != http.StatusUnauthorized {
		t.Fatalf("a delivery to the disabled webhook: %d, want 401", got)
	}
	mustCode(t, "show after disable", f.local(t, "webhooks", "show", "hooked"), 1, "no enabled webhook")
	mustCode(t, "disable twice", f.remote(t, f.admin, "webhooks", "disable", "hooked"), 1, "no enabled webhook")
	again := read(f.local(t, "webhooks", "enable", "hooked", "--json"))
	if again.Generation != 3 || again.Secret == rotated.Secret {
		t.Fatalf("enabled again: %+v; want generation 3 with a new secret", again)
	}
}
