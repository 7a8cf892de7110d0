// Package demo is the in-memory HTTP service the Starflow examples call:
// an inventory service, a payment service, a flaky data feed with a small
// warehouse, and a CI system. It keeps all state in memory, speaks JSON,
// and logs one line per request it handles.
//
// It exists so that examples/order-saga.yaml, examples/data-pipeline.yaml
// and examples/ci-pipeline.yaml have something real to talk to; the
// command in examples/services serves it on 127.0.0.1:8089, and
// examples/examples_test.go serves it in-process with httptest.
//
// Endpoints (request and response bodies are JSON):
//
//	POST /inventory/reserve   {sku, qty}                      → 201 {reservation_id, sku, qty, status, remaining}
//	                                                            409 when the SKU has too little stock
//	POST /inventory/release   {reservation_id}                → 200 {reservation_id, status: "released", ...}
//	POST /inventory/commit    {reservation_id, charge_id}     → 200 {reservation_id, status: "committed", order_id}
//	GET  /inventory/stock?sku=S                               → 200 {sku, available}
//	POST /payments/charge     {amount, currency, reservation_id}
//	                          Authorization: Bearer <token>   → 201 {charge_id, status: "captured", ...}
//	                                                            402 {charge_id, status: "declined", reason} above the limit
//	                                                            401 without a bearer token (or with the wrong one)
//	GET  /data/flaky?fail=N&records=M                         → 503 the first N calls per Idempotency-Key
//	                                                            (default 2; also header X-Fail-Times), then
//	                                                            200 {source, records: [...], count, failures_before_success}
//	GET  /data/users?ids=1,2,3                                → 200 {users: {"1": {id, name, country, tier}, ...}}
//	POST /data/load           {table, mode, batch_size, rows}  → 201 {load_id, table, mode, loaded, batches, total_amount_cents}
//	POST /ci/build            {repo, branch, commit}           → 200 {build_id, artifact_id, image, duration_ms}
//	POST /ci/test             {artifact_id, suite, fail}       → 200 {suite, passed, total, failed, failures, duration_ms}
//	POST /ci/deploy           {artifact_id, environment}       → 200 {deployment_id, environment, url, duration_ms}
//	GET  /healthz                                             → 200 {ok: true}
//
// Every POST honours the Idempotency-Key header the way payment APIs do:
// the first request with a key is executed and its answer (2xx or 4xx) is
// remembered; a later request with the same key and the same body gets the
// same answer again (with the header Idempotent-Replayed: true) and changes
// nothing; the same key with a different body is refused with 422. Starflow
// sends Idempotency-Key: <run_id>/<scope_path>/<step_id> with every
// service_call, stable across tries, attempts and resumes, so a retried or
// replayed step never reserves, charges or loads twice.
package demo

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config configures a Server. The zero value is usable.
type Config struct {
	// PaymentLimit: charges with an amount above it are declined with 402.
	// Default 1000.
	PaymentLimit float64
	// Stock is the number of units every SKU starts with. Default 100.
	Stock int
	// PaymentToken, when set, is the only bearer token /payments accepts;
	// when empty any non-empty bearer token is accepted.
	PaymentToken string
	// FlakyFailures is how many times /data/flaky fails per key when the
	// request does not say. Default 2.
	FlakyFailures int
	// CIDelay is the longest time a CI endpoint takes (build and deploy
	// take all of it, tests a little less). Default 300 ms; negative means
	// no delay.
	CIDelay time.Duration
	// Log receives one line per request. Default: discard.
	Log *log.Logger
}

// Stats counts what the services did (for tests and curiosity).
type Stats struct {
	Reservations       int // reservations created
	ActiveReservations int // created and neither released nor committed
	Released           int
	Committed          int
	Charges            int // charges captured
	Declines           int
	FlakyFailures      int // 503s answered by /data/flaky
	Loads              int
	Builds, Tests      int
	Deploys            int
	Replays            int // answers replayed for a repeated Idempotency-Key
}

// Server is the demo service. It is an http.Handler.
type Server struct {
	cfg Config
	log *log.Logger
	mux *http.ServeMux

	mu           sync.Mutex
	seq          int
	stock        map[string]int
	reservations map[string]*reservation
	idem         map[string]*savedAnswer // by method, path and key
	flaky        map[string]int          // failures answered so far, by key
	stats        Stats
}

type reservation struct {
	ID     string `json:"reservation_id"`
	SKU    string `json:"sku"`
	Qty    int    `json:"qty"`
	Status string `json:"status"` // reserved | released | committed
}

type savedAnswer struct {
	fingerprint [32]byte
	status      int
	body        []byte
}

// NewHandler returns a Server with the default configuration.
func NewHandler() http.Handler { return New(Config{}) }

// New returns a Server.
func New(cfg Config) *Server {
	if cfg.PaymentLimit == 0 {
		cfg.PaymentLimit = 1000
	}
	if cfg.Stock == 0 {
		cfg.Stock = 100
	}
	if cfg.FlakyFailures == 0 {
		cfg.FlakyFailures = 2
	}
	if cfg.CIDelay == 0 {
		cfg.CIDelay = 300 * time.Millisecond
	}
	if cfg.CIDelay < 0 {
		cfg.CIDelay = 0
	}
	lg := cfg.Log
	if lg == nil {
		lg = log.New(io.Discard, "", 0)
	}
	s := &Server{
		cfg: cfg, log: lg, mux: http.NewServeMux(),
		stock: map[string]int{}, reservations: map[string]*reservation{},
		idem: map[string]*savedAnswer{}, flaky: map[string]int{},
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	})
	s.mux.HandleFunc("POST /inventory/reserve", s.idempotent(s.reserve))
	s.mux.HandleFunc("POST /inventory/release", s.idempotent(s.release))
	s.mux.HandleFunc("POST /inventory/commit", s.idempotent(s.commit))
	s.mux.HandleFunc("GET /inventory/stock", s.stockLevel)
	s.mux.HandleFunc("POST /payments/charge", s.idempotent(s.charge))
	s.mux.HandleFunc("GET /data/flaky", s.flakyData)
	s.mux.HandleFunc("GET /data/users", s.users)
	s.mux.HandleFunc("POST /data/load", s.idempotent(s.load))
	s.mux.HandleFunc("POST /ci/build", s.slow(s.build))
	s.mux.HandleFunc("POST /ci/test", s.slow(s.test))
	s.mux.HandleFunc("POST /ci/deploy", s.slow(s.deploy))
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.log.Printf("%s %s → 404", r.Method, r.URL.Path)
		writeJSON(w, http.StatusNotFound, errBody("no such endpoint: %s %s (see go run ./examples/services -h)", r.Method, r.URL.Path))
	})
	return s
}

// ServeHTTP serves the demo endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	for _, r := range s.reservations {
		if r.Status == "reserved" {
			st.ActiveReservations++
		}
	}
	return st
}

// Reservation returns a copy of a reservation's state: its status is
// "reserved", "released" or "committed". ok is false for an unknown id.
func (s *Server) Reservation(id string) (status string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.reservations[id]
	if !ok {
		return "", false
	}
	return r.Status, true
}

// answer is what an endpoint function decides: a status and a JSON body.
type answer struct {
	status int
	body   any
	note   string // for the log line
}

// idempotent wraps a state-changing endpoint: it decodes the body, holds
// the lock while fn runs, and remembers the answer under the request's
// Idempotency-Key (if any) to replay it for repeats.
func (s *Server) idempotent(fn func(r *http.Request, body map[string]any) answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		raw, body, ok := readBody(w, r)
		if !ok {
			s.log.Printf("%s %s → 400 (body is not a JSON object)", r.Method, r.URL.Path)
			return
		}
		key := r.Header.Get("Idempotency-Key")
		fp := sha256.Sum256(canonical(raw))
		slot := r.Method + " " + r.URL.Path + " " + key

		s.mu.Lock()
		if key != "" {
			if prev, ok := s.idem[slot]; ok {
				if prev.fingerprint != fp {
					s.mu.Unlock()
					s.log.Printf("%s %s → 422 (Idempotency-Key %s reused with a different body)", r.Method, r.URL.Path, key)
					writeJSON(w, http.StatusUnprocessableEntity, errBody("Idempotency-Key %q was already used with a different request body", key))
					return
				}
				s.stats.Replays++
				s.mu.Unlock()
				s.log.Printf("%s %s → %d (replayed for Idempotency-Key %s)", r.Method, r.URL.Path, prev.status, key)
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Idempotent-Replayed", "true")
				w.WriteHeader(prev.status)
				_, _ = w.Write(prev.body)
				return
			}
		}
		a := fn(r, body)
		out, _ := json.Marshal(a.body)
		out = append(out, '\n')
		if key != "" && a.status < 500 {
			s.idem[slot] = &savedAnswer{fingerprint: fp, status: a.status, body: out}
		}
		s.mu.Unlock()

		line := fmt.Sprintf("%s %s → %d", r.Method, r.URL.Path, a.status)
		if a.note != "" {
			line += " " + a.note
		}
		if key != "" {
			line += " [Idempotency-Key " + key + "]"
		}
		s.log.Print(line)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		_, _ = w.Write(out)
	}
}

// slow wraps a CI endpoint: it decodes the body, waits like real work
// does (without holding the lock), then answers.
func (s *Server) slow(fn func(r *http.Request, body map[string]any) answer) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, body, ok := readBody(w, r)
		if !ok {
			s.log.Printf("%s %s → 400 (body is not a JSON object)", r.Method, r.URL.Path)
			return
		}
		a := fn(r, body)
		s.log.Printf("%s %s → %d %s", r.Method, r.URL.Path, a.status, a.note)
		writeJSON(w, a.status, a.body)
	}
}

// ---- inventory ----

func (s *Server) reserve(_ *http.Request, b map[string]any) answer {
	sku, _ := b["sku"].(string)
	qty, okQty := intField(b, "qty")
	if sku == "" || !okQty || qty < 1 {
		return answer{status: http.StatusBadRequest, body: errBody("want {\"sku\": non-empty string, \"qty\": integer ≥ 1}")}
	}
	avail, seen := s.stock[sku]
	if !seen {
		avail = s.cfg.Stock
	}
	if qty > avail {
		return answer{status: http.StatusConflict, body: errBody("only %d units of %s left, %d requested", avail, sku, qty),
			note: fmt.Sprintf("(out of stock: %s)", sku)}
	}
	s.stock[sku] = avail - qty
	s.seq++
	res := &reservation{ID: fmt.Sprintf("res-%04d", s.seq), SKU: sku, Qty: qty, Status: "reserved"}
	s.reservations[res.ID] = res
	s.stats.Reservations++
	return answer{status: http.StatusCreated, body: map[string]any{
		"reservation_id": res.ID, "sku": sku, "qty": qty, "status": res.Status, "remaining": s.stock[sku],
	}, note: fmt.Sprintf("(reserved %d × %s as %s)", qty, sku, res.ID)}
}

func (s *Server) release(_ *http.Request, b map[string]any) answer {
	id, _ := b["reservation_id"].(string)
	res, ok := s.reservations[id]
	switch {
	case !ok:
		return answer{status: http.StatusNotFound, body: errBody("no reservation %q", id)}
	case res.Status == "committed":
		return answer{status: http.StatusConflict, body: errBody("reservation %s is already committed", id)}
	case res.Status == "reserved":
		res.Status = "released"
		s.stock[res.SKU] += res.Qty
		s.stats.Released++
	}
	return answer{status: http.StatusOK, body: map[string]any{
		"reservation_id": id, "sku": res.SKU, "qty": res.Qty, "status": res.Status, "available": s.stock[res.SKU],
	}, note: fmt.Sprintf("(released %s: %d × %s back in stock)", id, res.Qty, res.SKU)}
}

func (s *Server) commit(_ *http.Request, b map[string]any) answer {
	id, _ := b["reservation_id"].(string)
	charge, _ := b["charge_id"].(string)
	res, ok := s.reservations[id]
	switch {
	case !ok:
		return answer{status: http.StatusNotFound, body: errBody("no reservation %q", id)}
	case charge == "":
		return answer{status: http.StatusBadRequest, body: errBody("charge_id is required")}
	case res.Status == "released":
		return answer{status: http.StatusConflict, body: errBody("reservation %s was released", id)}
	case res.Status == "reserved":
		res.Status = "committed"
		s.stats.Committed++
	}
	return answer{status: http.StatusOK, body: map[string]any{
		"reservation_id": id, "status": res.Status, "order_id": "ord-" + strings.TrimPrefix(id, "res-"), "charge_id": charge,
	}, note: fmt.Sprintf("(committed %s)", id)}
}

func (s *Server) stockLevel(w http.ResponseWriter, r *http.Request) {
	sku := r.URL.Query().Get("sku")
	s.mu.Lock()
	avail, ok := s.stock[sku]
	if !ok {
		avail = s.cfg.Stock
	}
	s.mu.Unlock()
	s.log.Printf("GET /inventory/stock → 200 (%s: %d)", sku, avail)
	writeJSON(w, http.StatusOK, map[string]any{"sku": sku, "available": avail})
}

// ---- payments ----

func (s *Server) charge(r *http.Request, b map[string]any) answer {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" || (s.cfg.PaymentToken != "" && tok != s.cfg.PaymentToken) {
		return answer{status: http.StatusUnauthorized, body: errBody("missing or wrong bearer token"), note: "(unauthorised)"}
	}
	amount, okAmount := b["amount"].(float64)
	currency, _ := b["currency"].(string)
	resID, _ := b["reservation_id"].(string)
	if !okAmount || amount <= 0 || currency == "" {
		return answer{status: http.StatusBadRequest, body: errBody("want {\"amount\": number > 0, \"currency\": string, \"reservation_id\": string}")}
	}
	if resID != "" {
		if res, ok := s.reservations[resID]; !ok || res.Status != "reserved" {
			return answer{status: http.StatusConflict, body: errBody("reservation %q is not active", resID)}
		}
	}
	s.seq++
	id := fmt.Sprintf("ch-%04d", s.seq)
	if amount > s.cfg.PaymentLimit {
		s.stats.Declines++
		return answer{status: http.StatusPaymentRequired, body: map[string]any{
			"charge_id": id, "status": "declined", "amount": amount, "currency": currency,
			"reason": fmt.Sprintf("amount %.2f %s exceeds the card limit of %.2f", amount, currency, s.cfg.PaymentLimit),
		}, note: fmt.Sprintf("(declined %.2f %s)", amount, currency)}
	}
	s.stats.Charges++
	return answer{status: http.StatusCreated, body: map[string]any{
		"charge_id": id, "status": "captured", "amount": amount, "currency": currency, "reservation_id": resID,
	}, note: fmt.Sprintf("(captured %.2f %s as %s)", amount, currency, id)}
}

// ---- data ----

var userNames = []struct{ name, country, tier string }{
	{"Ada Lovelace", "GB", "gold"}, {"Grace Hopper", "US", "gold"}, {"Alan Turing", "GB", "silver"},
	{"Katherine Johnson", "US", "silver"}, {"Emmy Noether", "DE", "bronze"}, {"Edsger Dijkstra", "NL", "bronze"},
}

func (s *Server) flakyData(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	fail := s.cfg.FlakyFailures
	if v := firstNonEmpty(q.Get("fail"), r.Header.Get("X-Fail-Times")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeJSON(w, http.StatusBadRequest, errBody("fail must be an integer ≥ 0"))
			return
		}
		fail = n
	}
	count := 8
	if v := q.Get("records"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 10000 {
			writeJSON(w, http.StatusBadRequest, errBody("records must be an integer from 0 to 10000"))
			return
		}
		count = n
	}
	key := r.Header.Get("Idempotency-Key")
	if key == "" {
		key = "no-key " + r.URL.RawQuery
	}
	s.mu.Lock()
	failed := s.flaky[key]
	if failed < fail {
		s.flaky[key] = failed + 1
		s.stats.FlakyFailures++
	}
	s.mu.Unlock()
	if failed < fail {
		s.log.Printf("GET /data/flaky → 503 (failure %d of %d for %s)", failed+1, fail, key)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errBody("feed temporarily unavailable (failure %d of %d)", failed+1, fail))
		return
	}
	records := make([]map[string]any, count)
	for i := range records {
		records[i] = map[string]any{
			"id":           fmt.Sprintf("evt-%05d", i+1),
			"user_id":      i%len(userNames) + 1,
			"amount_cents": 499 + (i*1733)%9000,
			"kind":         []string{"purchase", "purchase", "refund", "purchase"}[i%4],
		}
	}
	s.log.Printf("GET /data/flaky → 200 (%d records after %d failures)", count, failed)
	writeJSON(w, http.StatusOK, map[string]any{
		"source": "orders-feed", "count": count, "records": records, "failures_before_success": failed,
	})
}

func (s *Server) users(w http.ResponseWriter, r *http.Request) {
	out := map[string]any{}
	for _, part := range strings.Split(r.URL.Query().Get("ids"), ",") {
		id, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || id < 1 || id > len(userNames) {
			continue
		}
		u := userNames[id-1]
		out[strconv.Itoa(id)] = map[string]any{"id": id, "name": u.name, "country": u.country, "tier": u.tier}
	}
	s.log.Printf("GET /data/users → 200 (%d users)", len(out))
	writeJSON(w, http.StatusOK, map[string]any{"users": out})
}

func (s *Server) load(_ *http.Request, b map[string]any) answer {
	rows, ok := b["rows"].([]any)
	if !ok {
		return answer{status: http.StatusBadRequest, body: errBody("want {\"table\": string, \"rows\": [...], \"mode\": \"inline\"|\"bulk\", \"batch_size\": n}")}
	}
	table, _ := b["table"].(string)
	if table == "" {
		table = "events"
	}
	mode, _ := b["mode"].(string)
	if mode == "" {
		mode = "inline"
	}
	batch, ok := intField(b, "batch_size")
	if !ok || batch < 1 {
		batch = len(rows)
	}
	var total int64
	for _, row := range rows {
		if m, ok := row.(map[string]any); ok {
			if c, ok := m["amount_cents"].(float64); ok {
				total += int64(c)
			}
		}
	}
	batches := 0
	if len(rows) > 0 {
		batches = (len(rows) + batch - 1) / max(batch, 1)
	}
	s.seq++
	s.stats.Loads++
	return answer{status: http.StatusCreated, body: map[string]any{
		"load_id": fmt.Sprintf("load-%04d", s.seq), "table": table, "mode": mode,
		"loaded": len(rows), "batches": batches, "total_amount_cents": total,
	}, note: fmt.Sprintf("(%d rows into %s, %s, %d batches)", len(rows), table, mode, batches)}
}

// ---- CI ----

func (s *Server) pause(fraction float64, r *http.Request) time.Duration {
	d := time.Duration(float64(s.cfg.CIDelay) * fraction)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
	return d
}

func (s *Server) build(r *http.Request, b map[string]any) answer {
	repo, _ := b["repo"].(string)
	branch, _ := b["branch"].(string)
	commit, _ := b["commit"].(string)
	if repo == "" {
		return answer{status: http.StatusBadRequest, body: errBody("repo is required")}
	}
	d := s.pause(1, r)
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.stats.Builds++
	s.mu.Unlock()
	if commit == "" {
		commit = fmt.Sprintf("%07x", sha256.Sum256([]byte(repo+branch)))[:7]
	}
	artifact := fmt.Sprintf("art-%04d", n)
	return answer{status: http.StatusOK, body: map[string]any{
		"build_id": fmt.Sprintf("build-%04d", n), "artifact_id": artifact, "repo": repo, "branch": branch,
		"commit": commit, "image": fmt.Sprintf("registry.example/%s:%s", lastPathPart(repo), commit),
		"duration_ms": d.Milliseconds(),
	}, note: fmt.Sprintf("(built %s@%s as %s)", repo, branch, artifact)}
}

func (s *Server) test(r *http.Request, b map[string]any) answer {
	artifact, _ := b["artifact_id"].(string)
	suite, _ := b["suite"].(string)
	fail, _ := b["fail"].(bool)
	if artifact == "" {
		return answer{status: http.StatusBadRequest, body: errBody("artifact_id is required")}
	}
	if suite == "" {
		suite = "unit"
	}
	d := s.pause(0.7, r)
	s.mu.Lock()
	s.stats.Tests++
	s.mu.Unlock()
	total := map[string]int{"unit": 214, "integration": 37}[suite]
	if total == 0 {
		total = 50
	}
	var failures []string
	if fail {
		failures = []string{"TestCheckout_RoundsTax", "TestCheckout_EmptyCart"}
	}
	return answer{status: http.StatusOK, body: map[string]any{
		"suite": suite, "artifact_id": artifact, "passed": len(failures) == 0, "total": total,
		"failed": len(failures), "failures": orEmpty(failures), "duration_ms": d.Milliseconds(),
	}, note: fmt.Sprintf("(%s tests of %s: %d/%d passed)", suite, artifact, total-len(failures), total)}
}

func (s *Server) deploy(r *http.Request, b map[string]any) answer {
	artifact, _ := b["artifact_id"].(string)
	env, _ := b["environment"].(string)
	if artifact == "" || env == "" {
		return answer{status: http.StatusBadRequest, body: errBody("artifact_id and environment are required")}
	}
	d := s.pause(1, r)
	s.mu.Lock()
	s.seq++
	n := s.seq
	s.stats.Deploys++
	s.mu.Unlock()
	return answer{status: http.StatusOK, body: map[string]any{
		"deployment_id": fmt.Sprintf("dep-%04d", n), "artifact_id": artifact, "environment": env,
		"url": fmt.Sprintf("https://%s.example.test", env), "duration_ms": d.Milliseconds(),
	}, note: fmt.Sprintf("(deployed %s to %s)", artifact, env)}
}

// ---- helpers ----

// readBody reads a JSON object body (an empty body is {}); on error it
// answers 400 and returns ok=false.
func readBody(w http.ResponseWriter, r *http.Request) (raw []byte, body map[string]any, ok bool) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errBody("reading the body: %v", err))
		return nil, nil, false
	}
	body = map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &body); err != nil || body == nil {
			writeJSON(w, http.StatusBadRequest, errBody("the body must be a JSON object"))
			return nil, nil, false
		}
	}
	return raw, body, true
}

// canonical re-encodes JSON with sorted keys so that two bodies that mean
// the same thing have the same fingerprint.
func canonical(raw []byte) []byte {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return raw
	}
	b, _ := json.Marshal(v)
	return b
}

func intField(b map[string]any, name string) (int, bool) {
	f, ok := b[name].(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1e9 {
		return 0, false
	}
	return int(f), true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func errBody(format string, args ...any) map[string]any {
	return map[string]any{"error": fmt.Sprintf(format, args...)}
}

func firstNonEmpty(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func lastPathPart(s string) string {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[i+1:]
	}
	return s
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	sort.Strings(s)
	return s
}
