package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// workerHeader carries the worker's name (its CRASHTEST_WORKER variable):
// the workflows send it so the service can tell the workers apart.
const workerHeader = "X-Crashtest-Worker"

// sideEffects is the service every service_call step writes to. It
// records each request in the side_effects table of the test's schema and
// remembers, per idempotency key, the highest fencing epoch it accepted; a
// request carrying a lower epoch is refused with 409 (and recorded with
// accepted = false). A request is decided after its processing delay (a
// random 20–60 ms, or the body's delay_ms), as a service that commits at
// the end of its work would.
//
// hold makes the requests of one worker wait before their decision until
// release, as a slow network or service would delay them: the SIGSTOP
// test uses it to have a frozen worker's in-flight writes reach the
// service after another worker took its runs over, the SIGTERM test to
// keep a worker's runs in flight until it is told to stop.
type sideEffects struct {
	t      *testing.T
	c      *cluster
	server *httptest.Server

	mu       sync.Mutex
	highest  map[string]int64 // idempotency key → highest accepted epoch
	seq      int64
	holdFrom string        // worker whose requests wait for gate
	holdStep string        // when set, only requests of this step wait
	gate     chan struct{} // closed by release
	held     []*request    // requests waiting at the gate, then decided
	inflight int           // requests being handled
	errs     []error
}

// request is one request as the service understood it.
type request struct {
	runID, stepID, key, worker string
	epoch                      int64
	accepted                   bool
	decided                    bool
}

// newSideEffects creates the side_effects table and starts the service;
// both go away at cleanup.
func newSideEffects(t *testing.T, c *cluster) *sideEffects {
	t.Helper()
	_, err := c.pool().Exec(context.Background(), `
		CREATE TABLE side_effects (
		    seq             bigint PRIMARY KEY, -- decision order
		    run_id          uuid NOT NULL,
		    step_id         text NOT NULL,
		    idempotency_key text NOT NULL,
		    epoch           bigint NOT NULL,
		    accepted        boolean NOT NULL,
		    worker          text NOT NULL,
		    at              timestamptz NOT NULL DEFAULT clock_timestamp()
		)`)
	if err != nil {
		t.Fatal(err)
	}
	s := &sideEffects{t: t, c: c, highest: map[string]int64{}}
	s.server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.release()
		s.server.Close() // waits for the handlers
	})
	return s
}

// URL is where the workflows send their requests.
func (s *sideEffects) URL() string { return s.server.URL + "/effects" }

func (s *sideEffects) fail(err error) {
	s.mu.Lock()
	s.errs = append(s.errs, err)
	s.mu.Unlock()
}

func (s *sideEffects) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	req, delay, err := parseRequest(r)
	if err != nil {
		s.fail(err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// The work itself; the client may give up meanwhile, the service
	// finishes anyway.
	time.Sleep(delay)

	s.mu.Lock()
	gate := s.gate
	if gate != nil && req.worker == s.holdFrom && (s.holdStep == "" || req.stepID == s.holdStep) {
		s.held = append(s.held, req)
		s.mu.Unlock()
		<-gate
		s.mu.Lock()
	}
	s.seq++
	seq := s.seq
	req.accepted = req.epoch >= s.highest[req.key]
	if req.accepted {
		s.highest[req.key] = req.epoch
	}
	req.decided = true
	s.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.c.pool().Exec(ctx,
		`INSERT INTO side_effects (seq, run_id, step_id, idempotency_key, epoch, accepted, worker)
		 VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		seq, req.runID, req.stepID, req.key, req.epoch, req.accepted, req.worker); err != nil {
		s.fail(fmt.Errorf("record side effect %s: %w", req.key, err))
	}
	w.Header().Set("Content-Type", "application/json")
	if !req.accepted {
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, `{"error":"superseded fencing epoch %d"}`, req.epoch)
		return
	}
	fmt.Fprintf(w, `{"seq":%d,"epoch":%d}`, seq, req.epoch)
}

// parseRequest reads the Idempotency-Key (<run_id>/<scope_path>/<step_id>)
// and Starflow-Fencing-Token (<run_id>/<lease_epoch>) headers, the worker
// header and the body's optional delay_ms.
func parseRequest(r *http.Request) (*request, time.Duration, error) {
	key := r.Header.Get("Idempotency-Key")
	token := r.Header.Get("Starflow-Fencing-Token")
	parts := strings.Split(key, "/")
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" {
		return nil, 0, fmt.Errorf("Idempotency-Key %q is not <run_id>/<scope_path>/<step_id>", key)
	}
	run, epochText, ok := strings.Cut(token, "/")
	if !ok || run != parts[0] {
		return nil, 0, fmt.Errorf("Starflow-Fencing-Token %q does not name the run of Idempotency-Key %q", token, key)
	}
	epoch, err := strconv.ParseInt(epochText, 10, 64)
	if err != nil || epoch < 1 {
		return nil, 0, fmt.Errorf("Starflow-Fencing-Token %q: bad epoch", token)
	}
	var body struct {
		DelayMS int `json:"delay_ms"`
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, 1<<16))
	if err != nil {
		return nil, 0, err
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, 0, fmt.Errorf("body %q: %w", raw, err)
	}
	delay := time.Duration(20+rand.IntN(41)) * time.Millisecond
	if body.DelayMS > 0 {
		delay = time.Duration(body.DelayMS) * time.Millisecond
	}
	req := &request{runID: run, stepID: parts[2], key: key, epoch: epoch, worker: r.Header.Get(workerHeader)}
	return req, delay, nil
}

// hold makes the requests of worker wait before their decision until
// release; with step set, only those of that step.
func (s *sideEffects) hold(worker, step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holdFrom, s.holdStep, s.gate = worker, step, make(chan struct{})
}

// release lets the held requests be decided. Safe to call twice.
func (s *sideEffects) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gate != nil {
		close(s.gate)
		s.gate = nil
	}
}

// heldRequests is a copy of the requests held so far.
func (s *sideEffects) heldRequests() []request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]request, len(s.held))
	for i, r := range s.held {
		out[i] = *r
	}
	return out
}

// superseded reports whether the service accepted an epoch above epoch for
// key.
func (s *sideEffects) superseded(key string, epoch int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.highest[key] > epoch
}

// quiesce releases the held requests, waits until no request is being
// handled and reports the errors the service met.
func (s *sideEffects) quiesce() error {
	s.release()
	waitFor(s.t, 60*time.Second, "the side-effects service to finish its requests", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.inflight == 0
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.errs...)
}

// effect is one row of side_effects.
type effect struct {
	seq      int64
	runID    string
	stepID   string
	key      string
	epoch    int64
	accepted bool
	worker   string
}

// effects reads the side_effects table in decision order.
func (s *sideEffects) effects() []effect {
	s.t.Helper()
	rows, err := s.c.pool().Query(context.Background(),
		`SELECT seq, run_id::text, step_id, idempotency_key, epoch, accepted, worker FROM side_effects ORDER BY seq`)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	var out []effect
	for rows.Next() {
		var e effect
		if err := rows.Scan(&e.seq, &e.runID, &e.stepID, &e.key, &e.epoch, &e.accepted, &e.worker); err != nil {
			s.t.Fatal(err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	return out
}

// checkFencing checks the table after the fact: per idempotency key, the
// accepted epochs never decrease, and every refused request carried an
// epoch below one accepted before it. It returns the table.
func (s *sideEffects) checkFencing() []effect {
	s.t.Helper()
	if err := s.quiesce(); err != nil {
		s.t.Errorf("side-effects service: %v", err)
	}
	all := s.effects()
	if len(all) == 0 {
		s.t.Fatal("the side-effects service recorded no request")
	}
	highest := map[string]int64{}
	for _, e := range all {
		h := highest[e.key]
		switch {
		case e.accepted && e.epoch < h:
			s.t.Errorf("side effect %d (%s) accepted with epoch %d after epoch %d was accepted", e.seq, e.key, e.epoch, h)
		case !e.accepted && e.epoch >= h:
			s.t.Errorf("side effect %d (%s) refused with epoch %d although the highest accepted was %d", e.seq, e.key, e.epoch, h)
		case e.accepted:
			highest[e.key] = e.epoch
		}
	}
	return all
}
