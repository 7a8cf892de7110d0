package httpserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// HTTPDurationBuckets are the upper bounds, in seconds, of
// starflow_http_request_duration_seconds: 1 ms to 30 s (a long poll or a
// live stream lasts longer and lands in +Inf).
var HTTPDurationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// routeUnmatched is the route label of requests no route pattern matched
// (the catch-all's 404 and 405 answers).
const routeUnmatched = "unmatched"

// httpMetrics count the listener's requests by route pattern (the
// ServeMux pattern, e.g. "GET /api/runs/{id}": never the raw path, so
// the labels stay few) and status code, with their durations.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// newHTTPMetrics registers the metrics on reg (nil: none, and nil is
// returned). A registry that has them already (a second listener of one
// engine) shares them.
func newHTTPMetrics(reg prometheus.Registerer) (*httpMetrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "starflow_http_requests_total",
			Help: "HTTP requests the listener answered, by route pattern (\"unmatched\" when none matched) and status code."},
			[]string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "starflow_http_request_duration_seconds",
			Help:    "Duration of the listener's HTTP requests, from routing to the handler's return, by route pattern.",
			Buckets: HTTPDurationBuckets}, []string{"route"}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector reg already has under
// its name.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	switch {
	case err == nil:
		return c, nil
	case errors.As(err, &dup):
		if old, ok := dup.ExistingCollector.(C); ok {
			return old, nil
		}
	}
	return c, fmt.Errorf("httpserver: registering the HTTP metrics: %w", err)
}

// wrap counts every request next serves, routed by mux's patterns (the
// route is found before next runs, so requests that auth or the
// cross-origin check refuse count under the route they asked for).
func (m *httpMetrics) wrap(mux *http.ServeMux, next http.Handler) http.Handler {
	if m == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		began := time.Now()
		route := routeUnmatched
		if _, pattern := mux.Handler(r); pattern != "" && pattern != "/" {
			route = pattern
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		code := sw.code
		if code == 0 {
			code = http.StatusOK
		}
		m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
		m.duration.WithLabelValues(route).Observe(time.Since(began).Seconds())
	})
}

// statusWriter notes the status code written. Unwrap keeps
// http.ResponseController (flushes, deadlines) reaching the connection.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
