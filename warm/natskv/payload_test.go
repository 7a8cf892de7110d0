package natskv_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/natskv"
)

// smallPayloadServer starts an in-process nats-server with JetStream whose
// max_payload is maxPayload bytes, on a random port of 127.0.0.1, and
// returns its URL; it is stopped at the test's end.
func smallPayloadServer(t *testing.T, maxPayload int32) string {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(),
		MaxPayload: maxPayload, NoLog: true, NoSigs: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready within 10 s")
	}
	return ns.ClientURL()
}

// TestPayloadTooLarge: an entry over the server's max_payload is refused
// with warm.ErrInvalid (not warm.ErrUnavailable: retrying cannot help),
// naming the key and the size, and the store keeps working afterwards.
func TestPayloadTooLarge(t *testing.T) {
	const maxPayload = 16 << 10
	ctx := context.Background()
	s, err := natskv.Open(ctx, smallPayloadServer(t, maxPayload), natskv.Options{MemoryStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	big, _ := json.Marshal(strings.Repeat("x", 2*maxPayload))
	now := time.Now().UTC()
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, warm.ErrInvalid) || errors.Is(err, warm.ErrUnavailable) {
			t.Fatalf("%s of an entry over max_payload: err = %v; want warm.ErrInvalid (and not ErrUnavailable)", what, err)
		}
		if !strings.Contains(err.Error(), "bytes exceeds the NATS server's max_payload of 16384 bytes") {
			t.Fatalf("%s: error %q does not give the size and the limit", what, err)
		}
	}
	_, err = s.PutRun(ctx, &warm.RunEntry{RunID: "r1", Status: "succeeded", Output: big, Version: 1, UpdatedAt: now}, false)
	check("PutRun (create)", err)
	if !strings.Contains(err.Error(), "key ") || !strings.Contains(err.Error(), "r1") {
		t.Fatalf("PutRun error %q does not name the key", err)
	}
	// The update path (the key exists) too.
	if _, err := s.PutRun(ctx, &warm.RunEntry{RunID: "r1", Status: "running", Version: 1, UpdatedAt: now}, false); err != nil {
		t.Fatal(err)
	}
	_, err = s.PutRun(ctx, &warm.RunEntry{RunID: "r1", Status: "succeeded", Output: big, Version: 2, UpdatedAt: now}, false)
	check("PutRun (update)", err)
	err = s.PutSessionVar(ctx, "ws", "sess", "k", big)
	check("PutSessionVar", err)
	err = s.PutStep(ctx, &warm.StepEntry{RunID: "r1", StepID: strings.Repeat("s", 2*maxPayload), Status: "running", UpdatedAt: now})
	if err != nil && !errors.Is(err, warm.ErrInvalid) {
		t.Fatalf("PutStep with an oversized step id: err = %v; want warm.ErrInvalid", err)
	}
	// Nothing was broken: the connection and the entry are as before.
	e, err := s.GetRun(ctx, "r1")
	if err != nil || e.Version != 1 || e.Status != "running" {
		t.Fatalf("GetRun after the refusals = %+v, %v; want the version 1 entry", e, err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after the refusals: %v", err)
	}
}
