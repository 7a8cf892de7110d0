package natskv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// EmbeddedStartTimeoutDefault bounds how long StartServer waits for the
// embedded server to accept connections.
const EmbeddedStartTimeoutDefault = 10 * time.Second

// EmbeddedOptions configure an embedded, in-process nats-server with
// JetStream (single-node set-ups: `--warm embedded`).
type EmbeddedOptions struct {
	// Dir is the JetStream store directory (created if missing; required).
	// The CLI puts it next to the SQLite database (warmopen.EmbeddedDir).
	Dir string
	// Host is the listen address when Port is not 0. Default "127.0.0.1".
	Host string
	// Port: 0 = no TCP listener (only this process connects, in-process);
	// -1 = a random free port; > 0 = that port. Default 0.
	Port int
	// StartTimeout bounds the wait for the server to be ready. Default
	// EmbeddedStartTimeoutDefault.
	StartTimeout time.Duration
}

// Server is a running embedded nats-server.
type Server struct {
	ns     *server.Server
	unlock func()
	once   sync.Once
}

// StartServer starts an embedded nats-server with JetStream storing in
// eo.Dir. Errors: no Dir, a directory that cannot be created, a port in
// use, the directory locked by another embedded server, a server not ready
// within StartTimeout. Stop it with Shutdown.
func StartServer(eo EmbeddedOptions) (*Server, error) {
	if eo.Dir == "" {
		return nil, errors.New("warm/natskv: embedded NATS: EmbeddedOptions.Dir (the JetStream store directory) is empty")
	}
	if eo.Port < -1 || eo.Port > 65535 {
		return nil, fmt.Errorf("warm/natskv: embedded NATS: EmbeddedOptions.Port %d is outside -1..65535", eo.Port)
	}
	if eo.Host == "" {
		eo.Host = "127.0.0.1"
	}
	if eo.StartTimeout <= 0 {
		eo.StartTimeout = EmbeddedStartTimeoutDefault
	}
	if err := os.MkdirAll(eo.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("warm/natskv: embedded NATS: store directory: %w", err)
	}
	unlock, err := lockDir(eo.Dir)
	if err != nil {
		return nil, err
	}
	opts := &server.Options{
		ServerName: "starflow-embedded",
		Host:       eo.Host,
		Port:       eo.Port,
		DontListen: eo.Port == 0,
		JetStream:  true,
		StoreDir:   eo.Dir,
		NoLog:      true,
		NoSigs:     true,
		// No HTTP monitoring, no cluster, no leaf nodes: a private server.
	}
	if eo.Port == 0 {
		opts.Port = server.RANDOM_PORT // never the default 4222; DontListen skips it anyway
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("warm/natskv: embedded NATS in %s: %w", eo.Dir, err)
	}
	ns.Start()
	if !ns.ReadyForConnections(eo.StartTimeout) {
		ns.Shutdown()
		ns.WaitForShutdown()
		unlock()
		return nil, fmt.Errorf("warm/natskv: embedded NATS in %s (port %d) not ready within %v (port in use, or the store directory locked by another server?)", eo.Dir, eo.Port, eo.StartTimeout)
	}
	if !ns.JetStreamEnabled() {
		ns.Shutdown()
		ns.WaitForShutdown()
		unlock()
		return nil, fmt.Errorf("warm/natskv: embedded NATS in %s: JetStream did not start", eo.Dir)
	}
	return &Server{ns: ns, unlock: unlock}, nil
}

// ClientURL is "nats://HOST:PORT" of the server's listener, or "" when it
// has none (Port 0).
func (s *Server) ClientURL() string {
	if s.ns.Addr() == nil {
		return ""
	}
	return s.ns.ClientURL()
}

// Shutdown stops the server, waits for it, and releases the store
// directory. Safe to call twice.
func (s *Server) Shutdown() {
	s.once.Do(func() {
		s.ns.Shutdown()
		s.ns.WaitForShutdown()
		s.unlock()
	})
}

// OpenEmbedded starts an embedded server (StartServer) and opens a Store
// connected to it in-process; the Store's Close stops the server.
func OpenEmbedded(ctx context.Context, eo EmbeddedOptions, o Options) (*Store, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	srv, err := StartServer(eo)
	if err != nil {
		return nil, err
	}
	addr := "embedded NATS in " + eo.Dir
	s, err := open(ctx, "", addr, o, nats.InProcessServer(srv.ns))
	if err != nil {
		srv.Shutdown()
		return nil, err
	}
	s.onClose = srv.Shutdown
	return s, nil
}
