// Package warmopen opens a warm store by name: the factory the CLI and the
// root package use for --warm. It lives apart from package warm because it
// imports the implementations, which import warm.
//
// Import rule: the standard library, warm and its implementations.
package warmopen

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
	"github.com/starflow/starflow/warm/natskv"
)

// Options of Open.
type Options struct {
	// DataDir is the JetStream store directory of "embedded" (required
	// there, unused otherwise). EmbeddedDir derives it from the SQLite
	// database's path.
	DataDir string
	// NATS tunes the NATS stores ("embedded" and nats://); zero fields
	// take natskv's defaults.
	NATS natskv.Options
}

// Open opens the warm store named by spec:
//
//	memory             the in-process store (warm/memory): one process only
//	embedded           an in-process nats-server with JetStream storing in
//	                   o.DataDir, reached in-process (no TCP port); Close
//	                   stops it
//	nats://HOST:PORT   a NATS server with JetStream (also tls://, and a
//	                   comma-separated list of one cluster's servers);
//	                   nats://USER:PASSWORD@HOST:PORT or
//	                   nats://TOKEN@HOST:PORT authenticate (errors show
//	                   the URL without them: natskv.Redacted)
//
// A NATS server that does not answer yet is not an error: the store
// reconnects by itself and its calls fail with warm.ErrUnavailable until it
// answers (Ping to check). Errors: an unknown spec, embedded without
// DataDir, a bad URL or options, an embedded server that does not start.
func Open(ctx context.Context, spec string, o Options) (warm.Store, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "memory":
		return memory.New(), nil
	case spec == "embedded":
		if o.DataDir == "" {
			return nil, errors.New("warm store embedded: no data directory (warmopen.Options.DataDir)")
		}
		s, err := natskv.OpenEmbedded(ctx, natskv.EmbeddedOptions{Dir: o.DataDir}, o.NATS)
		if err != nil {
			return nil, fmt.Errorf("warm store embedded: %w", err)
		}
		return s, nil
	case strings.HasPrefix(spec, "nats://"), strings.HasPrefix(spec, "tls://"):
		s, err := natskv.Open(ctx, spec, o.NATS)
		if err != nil {
			return nil, fmt.Errorf("warm store %s: %w", natskv.Redacted(spec), err)
		}
		return s, nil
	default:
		return nil, fmt.Errorf("warm store %q: unknown; want memory, embedded or nats://HOST:PORT", spec)
	}
}

// EmbeddedDir is where "embedded" keeps its data for the SQLite database at
// dbPath: the directory dbPath + ".warm" next to it (starflow.db →
// starflow.db.warm/).
func EmbeddedDir(dbPath string) string {
	return filepath.Clean(dbPath) + ".warm"
}
