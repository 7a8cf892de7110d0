//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/client"
)

// service is the flaky local service the workflows call. POST /effect
// applies a side effect: it answers 503 at random (the step's retry policy
// retries it), refuses with 409 a request whose fencing epoch is below the
// highest it accepted for the idempotency key, and otherwise answers 200
// with a value computed from the body alone, so a run's output depends on
// its input only. Every decision is logged as an Effect. POST /notify
// receives the notify request of a wait and wakes it by its token through
// the server's POST /wake/{token}, after a random delay, retrying until
// the wake is applied or refused as closed.
type service struct {
	t      *testing.T
	srv    *http.Server
	url    string
	flaky  float64 // probability of a 503
	wakeTo func() *client.Client

	mu      sync.Mutex
	rng     *rand.Rand
	highest map[string]int64
	effects []Effect
	seq     int64

	wakesSent, wakesApplied, wakesClosed atomic.Int64
	ctx                                  context.Context
	wg                                   sync.WaitGroup
}

func startService(t *testing.T, ctx context.Context, seed uint64, flaky float64) *service {
	t.Helper()
	s := &service{t: t, flaky: flaky, rng: rand.New(rand.NewPCG(seed, 17)), highest: map[string]int64{}, ctx: ctx}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /effect", s.effect)
	mux.HandleFunc("POST /notify", s.notify)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.url = "http://" + l.Addr().String()
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.srv.Shutdown(sctx)
		s.wg.Wait()
	})
	return s
}

// value is what /effect answers for n: a pure function of the body.
func value(n int64) int64 { return n*n + 7 }

func (s *service) effect(w http.ResponseWriter, r *http.Request) {
	var body struct {
		N int64 `json:"n"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	token := r.Header.Get("Starflow-Fencing-Token")
	runID, epochText, _ := strings.Cut(token, "/")
	epoch, err := strconv.ParseInt(epochText, 10, 64)
	if key == "" || err != nil {
		http.Error(w, "Idempotency-Key and Starflow-Fencing-Token <run_id>/<epoch> are required", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	delay := time.Duration(2+s.rng.IntN(15)) * time.Millisecond
	flaky := s.rng.Float64() < s.flaky
	s.mu.Unlock()
	// The work takes a while; the decision is made at its end, as a
	// service that commits last would.
	time.Sleep(delay)
	s.mu.Lock()
	s.seq++
	e := Effect{Seq: s.seq, RunID: runID, Key: key, Epoch: epoch, Worker: r.Header.Get("X-Chaos-Worker"), At: time.Now()}
	switch {
	case flaky:
		e.Refused = "flaky"
	case epoch < s.highest[key]:
		e.Refused = "stale"
	default:
		e.Accepted = true
		s.highest[key] = epoch
	}
	s.effects = append(s.effects, e)
	s.mu.Unlock()
	switch e.Refused {
	case "flaky":
		http.Error(w, "try again", http.StatusServiceUnavailable)
	case "stale":
		http.Error(w, "a newer lease already wrote this", http.StatusConflict)
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]int64{"value": value(body.N)})
	}
}

// Effects is a copy of the log.
func (s *service) Effects() []Effect {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Effect(nil), s.effects...)
}

func (s *service) notify(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Token string `json:"token"`
		N     int64  `json:"n"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&body); err != nil || body.Token == "" {
		http.Error(w, "a notify body with a token is required", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	delay := time.Duration(50+s.rng.IntN(1500)) * time.Millisecond
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.wake(body.Token, body.N, delay)
	}()
}

// wake posts the token until the server applies it or says the wait is
// closed (already woken: a notify sent twice, or a retry of a wake whose
// answer was lost).
func (s *service) wake(token string, n int64, delay time.Duration) {
	payload, _ := json.Marshal(map[string]int64{"approved_with": value(n)})
	select {
	case <-time.After(delay):
	case <-s.ctx.Done():
		return
	}
	for {
		s.wakesSent.Add(1)
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		_, err := s.wakeTo().Wake(ctx, token, payload)
		cancel()
		var p *api.Problem
		switch {
		case err == nil:
			s.wakesApplied.Add(1)
			return
		case errors.As(err, &p) && (p.Status == http.StatusConflict || p.Status == http.StatusGone || p.Status == http.StatusNotFound):
			s.wakesClosed.Add(1)
			return
		}
		select {
		case <-time.After(300 * time.Millisecond):
		case <-s.ctx.Done():
			return
		}
	}
}
