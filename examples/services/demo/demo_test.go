package demo

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func call(t *testing.T, h http.Handler, method, path, key, body string, hdr ...string) (int, map[string]any, http.Header) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object", method, path, rec.Body.String())
	}
	return rec.Code, out, rec.Header()
}

func TestReserveIsIdempotent(t *testing.T) {
	s := New(Config{})
	code, first, _ := call(t, s, "POST", "/inventory/reserve", "k1", `{"sku": "widget", "qty": 3}`)
	if code != 201 {
		t.Fatalf("reserve: %d %v", code, first)
	}
	// Same key, same body (keys in another order): the same answer, replayed.
	code, again, hdr := call(t, s, "POST", "/inventory/reserve", "k1", `{"qty": 3, "sku": "widget"}`)
	if code != 201 || again["reservation_id"] != first["reservation_id"] || hdr.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("repeat: %d %v (replayed %q), want the first answer %v", code, again, hdr.Get("Idempotent-Replayed"), first)
	}
	if st := s.Stats(); st.Reservations != 1 || st.Replays != 1 {
		t.Fatalf("stats %+v, want 1 reservation and 1 replay", st)
	}
	// Same key, another body: refused.
	if code, _, _ := call(t, s, "POST", "/inventory/reserve", "k1", `{"sku": "widget", "qty": 4}`); code != 422 {
		t.Fatalf("key reused with another body: %d, want 422", code)
	}
	// Release gives the stock back once.
	id := first["reservation_id"].(string)
	for i := 0; i < 2; i++ {
		code, out, _ := call(t, s, "POST", "/inventory/release", "", `{"reservation_id": "`+id+`"}`)
		if code != 200 || out["available"] != 100.0 {
			t.Fatalf("release #%d: %d %v, want 200 with 100 available", i+1, code, out)
		}
	}
}

func TestChargeDeclinesOverTheLimit(t *testing.T) {
	s := New(Config{PaymentLimit: 50})
	auth := []string{"Authorization", "Bearer t"}
	if code, _, _ := call(t, s, "POST", "/payments/charge", "", `{"amount": 10, "currency": "EUR"}`); code != 401 {
		t.Fatalf("no token: %d, want 401", code)
	}
	if code, out, _ := call(t, s, "POST", "/payments/charge", "c1", `{"amount": 10, "currency": "EUR"}`, auth...); code != 201 || out["status"] != "captured" {
		t.Fatalf("small charge: %d %v", code, out)
	}
	code, out, _ := call(t, s, "POST", "/payments/charge", "c2", `{"amount": 50.01, "currency": "EUR"}`, auth...)
	if code != 402 || out["status"] != "declined" {
		t.Fatalf("large charge: %d %v, want 402 declined", code, out)
	}
	// The decline is remembered under its key too.
	if code, again, _ := call(t, s, "POST", "/payments/charge", "c2", `{"amount": 50.01, "currency": "EUR"}`, auth...); code != 402 || again["charge_id"] != out["charge_id"] {
		t.Fatalf("repeated decline: %d %v", code, again)
	}
	if st := s.Stats(); st.Charges != 1 || st.Declines != 1 {
		t.Fatalf("stats %+v, want 1 charge and 1 decline", st)
	}
}

func TestFlakyFailsPerKey(t *testing.T) {
	s := New(Config{})
	for i, want := range []int{503, 503, 200, 200} {
		code, out, _ := call(t, s, "GET", "/data/flaky?records=3", "a", "")
		if code != want {
			t.Fatalf("call %d with key a: %d %v, want %d", i+1, code, out, want)
		}
	}
	if code, _, _ := call(t, s, "GET", "/data/flaky?fail=1", "b", ""); code != 503 {
		t.Fatalf("first call with key b and fail=1: %d, want 503", code)
	}
	code, out, _ := call(t, s, "GET", "/data/flaky?fail=1&records=2", "b", "")
	if code != 200 || out["count"] != 2.0 || out["failures_before_success"] != 1.0 {
		t.Fatalf("second call with key b: %d %v", code, out)
	}
}
