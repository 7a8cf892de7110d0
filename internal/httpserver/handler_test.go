package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/warm"
)

type fakeBackend struct {
	wakeFn   func(token string, payload json.RawMessage) (*starflowtype.Wait, error)
	health   starflow.Health
	run      *warm.RunEntry
	runErr   error
	progress []*warm.Progress
	events   []*warm.EventEntry
	runners  []*warm.Presence
	liveErr  error
}

func (f *fakeBackend) Health(context.Context) starflow.Health { return f.health }
func (f *fakeBackend) LiveRun(_ context.Context, id string) (*warm.RunEntry, error) {
	if f.runErr != nil {
		return nil, f.runErr
	}
	if f.run == nil || f.run.RunID != id {
		return nil, starflowtype.ErrNotFound
	}
	return f.run, nil
}
func (f *fakeBackend) LiveProgress(context.Context, string) ([]*warm.Progress, error) {
	return f.progress, f.liveErr
}
func (f *fakeBackend) LiveEvents(_ context.Context, _ string, after int64) ([]*warm.EventEntry, error) {
	var out []*warm.EventEntry
	for _, e := range f.events {
		if e.ID > after {
			out = append(out, e)
		}
	}
	return out, f.liveErr
}
func (f *fakeBackend) LiveRunners(context.Context) ([]*warm.Presence, error) {
	return f.runners, f.liveErr
}

func (f *fakeBackend) Wake(_ context.Context, token string, payload json.RawMessage) (*starflowtype.Wait, error) {
	if f.wakeFn == nil {
		return nil, errors.New("no wake in this backend")
	}
	return f.wakeFn(token, payload)
}

func get(t *testing.T, h http.Handler, path string) (int, string, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Content-Type"), string(body)
}

func TestHealthz(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    starflow.Health
		code int
	}{
		{"ok", starflow.Health{Status: "ok", StoreOK: true, Warm: starflow.WarmOK, WarmReachable: true}, 200},
		{"warm critical still serves", starflow.Health{Status: "ok", StoreOK: true, Warm: starflow.WarmCritical, OutboxPending: 12, OutboxOldestAgeSeconds: 31.5}, 200},
		{"store down", starflow.Health{Status: "unavailable", StoreError: "connection refused", Warm: starflow.WarmOK}, 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := New(Config{Backend: &fakeBackend{health: tc.h}})
			if err != nil {
				t.Fatal(err)
			}
			code, ctype, body := get(t, h, "/healthz")
			if code != tc.code || ctype != "application/json" {
				t.Fatalf("GET /healthz: %d %s, want %d application/json\n%s", code, ctype, tc.code, body)
			}
			var got starflow.Health
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatal(err)
			}
			if got.Warm != tc.h.Warm || got.OutboxPending != tc.h.OutboxPending || got.StoreOK != tc.h.StoreOK {
				t.Fatalf("body %s does not carry %+v", body, tc.h)
			}
			var raw map[string]any
			_ = json.Unmarshal([]byte(body), &raw)
			for _, k := range []string{"warm", "outbox_pending", "outbox_oldest_age_seconds", "warm_reachable", "store_ok"} {
				if _, ok := raw[k]; !ok {
					t.Errorf("health answer lacks %q: %s", k, body)
				}
			}
		})
	}
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "starflow_outbox_pending", Help: "unapplied rows"})
	g.Set(7)
	reg.MustRegister(g)
	h, _ := New(Config{Backend: &fakeBackend{}, Gatherer: reg})
	code, ctype, body := get(t, h, "/metrics")
	if code != 200 || !strings.HasPrefix(ctype, "text/plain") {
		t.Fatalf("GET /metrics: %d %s", code, ctype)
	}
	if !strings.Contains(body, "starflow_outbox_pending 7") {
		t.Fatalf("exposition lacks the gauge:\n%s", body)
	}
}

func TestLiveRun(t *testing.T) {
	now := time.Now().UTC()
	b := &fakeBackend{
		run:      &warm.RunEntry{RunID: "r1", Status: "running", Version: 4, UpdatedAt: now},
		progress: []*warm.Progress{{RunID: "r1", StepID: "load", Fraction: 0.5, Message: "half", At: now}},
		events: []*warm.EventEntry{{ID: 7, RunID: "r1", EventType: "run_started", CreatedAt: now},
			{ID: 9, RunID: "r1", EventType: "node_start", NodeID: "load", CreatedAt: now}},
		runners: []*warm.Presence{{RunnerID: "w1", Pools: []string{"p"}, RunsHeld: 2, LastBeat: now}},
	}
	h, _ := New(Config{Backend: b})

	code, _, body := get(t, h, "/live/runs/r1")
	if code != 200 {
		t.Fatalf("GET /live/runs/r1: %d %s", code, body)
	}
	var v LiveRunView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.Run.RunID != "r1" || v.Run.Version != 4 || len(v.Progress) != 1 || v.Progress[0].Fraction != 0.5 ||
		len(v.Events) != 2 || v.Events[1].ID != 9 || v.Events[1].NodeID != "load" {
		t.Fatalf("live run view %s", body)
	}

	code, _, body = get(t, h, "/live/runs/r1/events?after=7")
	var ev LiveEventsView
	if err := json.Unmarshal([]byte(body), &ev); err != nil || code != 200 || len(ev.Events) != 1 || ev.Events[0].ID != 9 {
		t.Fatalf("GET /live/runs/r1/events?after=7: %d %s", code, body)
	}
	code, _, body = get(t, h, "/live/runs/r1/events?after=9")
	ev = LiveEventsView{}
	if err := json.Unmarshal([]byte(body), &ev); err != nil || code != 200 || ev.Events == nil || len(ev.Events) != 0 {
		t.Fatalf("GET /live/runs/r1/events?after=9: %d %s, want an empty list", code, body)
	}
	code, ctype, body := get(t, h, "/live/runs/r1/events?after=x")
	if code != 400 || ctype != "application/problem+json" || !strings.Contains(body, "after") {
		t.Fatalf("GET /live/runs/r1/events?after=x: %d %s %s", code, ctype, body)
	}

	code, ctype, body = get(t, h, "/live/runs/nope")
	if code != 404 || ctype != "application/problem+json" || !strings.Contains(body, `"status":404`) {
		t.Fatalf("GET /live/runs/nope: %d %s %s", code, ctype, body)
	}

	code, _, body = get(t, h, "/live/runners")
	var rv LiveRunnersView
	if err := json.Unmarshal([]byte(body), &rv); err != nil || code != 200 || len(rv.Runners) != 1 || rv.Runners[0].RunsHeld != 2 {
		t.Fatalf("GET /live/runners: %d %s", code, body)
	}

	b.runErr = starflow.ErrNoWarm
	if code, _, body := get(t, h, "/live/runs/r1"); code != 503 || !strings.Contains(body, "no warm tier") {
		t.Fatalf("without a warm tier: %d %s", code, body)
	}
	// The warm store's own error text stays in the log (issue 10 item 6).
	b.runErr = errors.New("nats: no servers available at nats://user:pw@10.0.0.7:4222")
	if code, _, body := get(t, h, "/live/runs/r1"); code != 503 || !strings.Contains(body, "warm store did not answer") ||
		strings.Contains(body, "nats") || strings.Contains(body, "10.0.0.7") {
		t.Fatalf("warm down: %d %s", code, body)
	}
}

func TestUnknownRouteIsAProblem(t *testing.T) {
	h, _ := New(Config{Backend: &fakeBackend{}})
	code, ctype, _ := get(t, h, "/nope")
	if code != 404 || ctype != "application/problem+json" {
		t.Fatalf("GET /nope: %d %s", code, ctype)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Post(srv.URL+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("POST /healthz: %d, want 405", res.StatusCode)
	}
}

func TestNewNeedsBackend(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a backend: no error")
	}
}

func TestListen(t *testing.T) {
	h, _ := New(Config{Backend: &fakeBackend{health: starflow.Health{Status: "ok", StoreOK: true, Warm: starflow.WarmOK}}})
	s, err := Listen("127.0.0.1:0", h, ServerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get("http://" + s.Addr() + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Fatalf("status %d", res.StatusCode)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	if _, err := Listen("nonsense", h, ServerConfig{}); err == nil || !strings.Contains(err.Error(), "nonsense") {
		t.Fatalf("bad address: %v", err)
	}
	if _, err := Listen(s.Addr()+"x", h, ServerConfig{}); err == nil {
		t.Fatal("bad port: no error")
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8480": true, "localhost:1": true, "[::1]:80": true,
		"0.0.0.0:8480": false, ":8480": false, "10.0.0.1:80": false, "bad": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v", addr, got)
		}
	}
}
