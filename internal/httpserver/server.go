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

// Server is a bound listener. Listen binds and serves; Bind binds only
// (so Addr is known before the handler exists) and Serve starts serving.
// Stop it with Shutdown.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error

	mu      sync.Mutex
	serving bool
	stopped bool

	once    sync.Once
	stopErr error
}

// Listen binds addr ("HOST:PORT"; port 0 picks a free one) and serves h in
// the background. Errors name the address.
func Listen(addr string, h http.Handler) (*Server, error) {
	s, err := Bind(addr)
	if err != nil {
		return nil, err
	}
	if err := s.Serve(h); err != nil {
		return nil, err
	}
	return s, nil
}

// Bind binds addr ("HOST:PORT"; port 0 picks a free one) without serving
// yet: connections wait in the backlog until Serve. It lets a process
// learn the bound address (Addr) before it builds what the handler serves,
// e.g. the engine whose wake URL names this listener. Errors name the
// address.
func Bind(addr string) (*Server, error) {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("listen address %q: want HOST:PORT (e.g. 127.0.0.1:8480): %w", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	return &Server{
		srv:  &http.Server{ReadHeaderTimeout: 10 * time.Second},
		ln:   ln,
		done: make(chan error, 1),
	}, nil
}

// Serve serves h on the bound listener in the background. Errors: a
// second call, or a call after Shutdown.
func (s *Server) Serve(h http.Handler) error {
	if h == nil {
		return errors.New("httpserver: Serve needs a handler")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopped:
		return fmt.Errorf("httpserver: listener %s is shut down", s.Addr())
	case s.serving:
		return fmt.Errorf("httpserver: listener %s is already serving", s.Addr())
	}
	s.serving = true
	s.srv.Handler = h
	go func() {
		err := s.srv.Serve(s.ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return nil
}

// Addr is the bound address (with the port chosen when 0 was asked).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Shutdown stops accepting, waits for requests in flight until ctx is done,
// then closes the rest. A listener that never served is closed. Safe to
// call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.once.Do(func() {
		s.mu.Lock()
		s.stopped = true
		serving := s.serving
		s.mu.Unlock()
		if !serving {
			if err := s.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
				s.stopErr = err
			}
			return
		}
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
