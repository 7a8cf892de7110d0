package httpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// AddrDefault is the listen address of `starflow dev` and `starflow
// server` when --addr is not given: loopback only.
const AddrDefault = "127.0.0.1:8480"

// Defaults of ServerConfig.
const (
	// ReadHeaderTimeoutDefault bounds reading a request's headers: a
	// client that sends them slowly (slowloris) is disconnected.
	ReadHeaderTimeoutDefault = 5 * time.Second
	// ReadTimeoutDefault bounds reading a whole request, body included
	// (a wake payload is at most MaxWakeBody).
	ReadTimeoutDefault = 30 * time.Second
	// WriteTimeoutDefault bounds writing a response, from the end of the
	// request's headers. Every route answers at once (reads are bounded
	// by Config.Timeout, 5 s); a streaming route would lift it for itself
	// with http.ResponseController.SetWriteDeadline.
	WriteTimeoutDefault = 30 * time.Second
	// IdleTimeoutDefault is how long a kept-alive connection may wait for
	// its next request (longer than a reverse proxy's usual 60 s upstream
	// keep-alive, so the proxy closes first).
	IdleTimeoutDefault = 120 * time.Second
	// MaxHeaderBytesDefault bounds a request's header block (request line
	// and headers); more is answered 431.
	MaxHeaderBytesDefault = 64 << 10
)

// ServerConfig configures the listener. Zero fields take the defaults.
type ServerConfig struct {
	// ReadHeaderTimeout: default ReadHeaderTimeoutDefault (5 s).
	ReadHeaderTimeout time.Duration
	// ReadTimeout: default ReadTimeoutDefault (30 s).
	ReadTimeout time.Duration
	// WriteTimeout: default WriteTimeoutDefault (30 s).
	WriteTimeout time.Duration
	// IdleTimeout: default IdleTimeoutDefault (120 s).
	IdleTimeout time.Duration
	// MaxHeaderBytes (bytes): default MaxHeaderBytesDefault (64 KiB).
	MaxHeaderBytes int
	// AllowedHosts are the names, besides the loopback ones, that the Host
	// header of a request to a loopback listener may carry: a reverse
	// proxy's public name (e.g. the host of --wake-url), matched without
	// regard to case or port (a port in an entry is ignored). Requests to
	// a loopback listener with another Host are refused 403 (DNS
	// rebinding).
	AllowedHosts []string
	// TLSCertFile and TLSKeyFile, when both are set, serve HTTPS with
	// this certificate chain and private key (PEM files).
	TLSCertFile, TLSKeyFile string
}

// WithDefaults returns c with zero fields set to their defaults.
func (c ServerConfig) WithDefaults() ServerConfig {
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = ReadHeaderTimeoutDefault
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = ReadTimeoutDefault
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = WriteTimeoutDefault
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = IdleTimeoutDefault
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = MaxHeaderBytesDefault
	}
	return c
}

// Validate reports an AllowedHosts entry that is not a host name or IP
// address (with an optional port).
func (c ServerConfig) Validate() error {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("TLS needs both a certificate file and a key file (--tls-cert and --tls-key)")
	}
	for _, h := range c.AllowedHosts {
		if hostName(h) == "" || strings.ContainsAny(h, "/ @?#") {
			return fmt.Errorf("allowed host %q: want a host name or IP address (e.g. starflow.example.com)", h)
		}
	}
	return nil
}

// Server is a bound listener. Listen binds and serves; Bind binds only
// (so Addr is known before the handler exists) and Serve starts serving.
// Stop it with Shutdown.
type Server struct {
	srv   *http.Server
	ln    net.Listener
	done  chan error
	hosts map[string]bool // names a loopback listener answers to; nil: any
	cert  string          // TLS certificate file; "" = plain HTTP

	mu      sync.Mutex
	serving bool
	stopped bool

	once    sync.Once
	stopErr error
}

// Listen binds addr ("HOST:PORT"; port 0 picks a free one) and serves h in
// the background. Errors name the address.
func Listen(addr string, h http.Handler, cfg ServerConfig) (*Server, error) {
	s, err := Bind(addr, cfg)
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
// address, or the cfg field that is wrong.
//
// The server applies cfg's timeouts and header limit to every connection,
// and, when addr is a loopback address, answers only requests whose Host
// names this listener: 127.0.0.1, localhost, [::1], addr's own host, or
// one of cfg.AllowedHosts (any port: a port forward changes it, and DNS
// rebinding works by name). Others get 403.
func Bind(addr string, cfg ServerConfig) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: want HOST:PORT (e.g. 127.0.0.1:8480): %w", addr, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.WithDefaults()
	var tlsCfg *tls.Config
	if cfg.TLSCertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("TLS certificate %s and key %s: %w", cfg.TLSCertFile, cfg.TLSKeyFile, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	s := &Server{
		srv: &http.Server{
			ReadHeaderTimeout: cfg.ReadHeaderTimeout,
			ReadTimeout:       cfg.ReadTimeout,
			WriteTimeout:      cfg.WriteTimeout,
			IdleTimeout:       cfg.IdleTimeout,
			MaxHeaderBytes:    cfg.MaxHeaderBytes,
			TLSConfig:         tlsCfg,
		},
		ln:   ln,
		done: make(chan error, 1),
		cert: cfg.TLSCertFile,
	}
	if IsLoopback(addr) {
		s.hosts = map[string]bool{"127.0.0.1": true, "localhost": true, "::1": true, strings.ToLower(host): true}
		for _, h := range cfg.AllowedHosts {
			s.hosts[hostName(h)] = true
		}
	}
	return s, nil
}

// hostName is the lower-case name or address of a Host value, without
// its port or IPv6 brackets ("" when there is none).
func hostName(hostport string) string {
	h := hostport
	if name, _, err := net.SplitHostPort(hostport); err == nil {
		h = name
	}
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}

// hostGuard refuses, with 403, a request whose Host header names another
// host than this listener's (a DNS-rebinding page). A request without
// Host (HTTP/1.0) cannot be a rebinding and passes.
func (s *Server) hostGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Host != "" && !s.hosts[hostName(r.Host)] {
			problem(w, http.StatusForbidden, "host not allowed", fmt.Sprintf(
				"Host %q is not a name of this listener: a loopback listener answers to 127.0.0.1, localhost, [::1] and the names allowed with --allowed-host (protection against DNS rebinding)",
				r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
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
	if st, ok := h.(*stoppable); ok {
		s.srv.RegisterOnShutdown(st.stop)
	}
	if s.hosts != nil {
		h = s.hostGuard(h)
	}
	s.srv.Handler = h
	go func() {
		var err error
		if s.cert != "" {
			err = s.srv.ServeTLS(s.ln, "", "") // the pair Bind loaded
		} else {
			err = s.srv.Serve(s.ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return nil
}

// URL is the listener's base URL: https://ADDR with TLS, http://ADDR
// without.
func (s *Server) URL() string {
	if s.cert != "" {
		return "https://" + s.Addr()
	}
	return "http://" + s.Addr()
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
