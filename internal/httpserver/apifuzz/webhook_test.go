package apifuzz

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/webhook"
)

// FuzzWebhookTrigger sends arbitrary bodies, signatures and delivery ids
// to the trigger of a workflow whose webhook is enabled: only a body
// signed with the secret is ever 202; an unsigned or wrongly signed one
// is always 401; nothing is a 5xx or a panic.
func FuzzWebhookTrigger(f *testing.F) {
	h := fuzzHandler(f)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/api/workflows/quick/webhook", nil))
	var w api.Webhook
	if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &w) != nil || w.Secret == "" {
		f.Fatalf("enable the webhook: %d %s", rec.Code, rec.Body.String())
	}
	f.Add([]byte(`{"n": 1}`), true, "", "d-1")
	f.Add([]byte(`{"n": "x"}`), true, "", "")
	f.Add([]byte(`[]`), false, "sha256="+strings.Repeat("0", 64), "")
	f.Add([]byte(``), true, "", "\x00")
	f.Add([]byte(`{"n": 1e400}`), false, "SHA256=", strings.Repeat("d", 300))
	f.Fuzz(func(t *testing.T, body []byte, sign bool, signature, delivery string) {
		if sign {
			signature = webhook.Sign(w.Secret, body)
		}
		req := httptest.NewRequest("POST", "/api/workflows/quick/trigger?workspace=default", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		if signature != "" && !strings.ContainsAny(signature, "\r\n\x00") {
			req.Header.Set(api.WebhookSignatureHeader, signature)
		}
		if delivery != "" && !strings.ContainsAny(delivery, "\r\n\x00") {
			req.Header.Set(api.WebhookDeliveryHeader, delivery)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		checkAnswer(t, "POST", "/api/workflows/quick/trigger", body, rec)
		valid := webhook.Verify(w.Secret, body, req.Header.Get(api.WebhookSignatureHeader))
		switch {
		case !valid && rec.Code != http.StatusUnauthorized:
			t.Fatalf("a delivery without the body's signature (%q): %d %s, want 401", signature, rec.Code, rec.Body.String())
		case valid && rec.Code == http.StatusUnauthorized:
			t.Fatalf("a delivery signed with the secret: 401 %s", rec.Body.String())
		}
	})
}
