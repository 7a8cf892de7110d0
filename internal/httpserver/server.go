package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"
)

// AddrDefault is the listen address of `starflow dev` and `starflow
// server` when --addr is not given: loopback only.
const AddrDefault = "127.0.0.1:8480"

// Server is a started listener. Stop it with Shutdown.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error

	once    sync.Once
	stopErr error
}

// Listen binds addr ("HOST:PORT"; port 0 picks a free one) and serves h in
// the background. Errors name the address.
func Listen(addr string, h http.Handler) (*Server, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("listen address %q: want HOST:PORT (e.g. 127.0.0.1:8480): %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	s := &Server{
		srv:  &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr is the bound address (with the port chosen when 0 was asked).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops accepting, waits for requests in flight until ctx is done,
// then closes the rest. Safe to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() {
		err := s.srv.Shutdown(ctx)
		if err != nil {
			_ = s.srv.Close()
		}
		s.stopErr = errors.Join(err, <-s.done)
	})
	return s.stopErr
}

// IsLoopback reports whether addr's host is a loopback address or
// "localhost".
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
