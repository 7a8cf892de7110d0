package main

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCLIEnqueueAndWorker: apply, enqueue (idempotently), and a real
// `starflow worker` process executes the run; SIGTERM stops it with exit 0.
func TestCLIEnqueueAndWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "three.yaml", threeSteps)
	if r := starflowCmd(t, dir, nil, "apply", "three.yaml", "--db", "w.db"); r.code != 0 {
		t.Fatalf("apply: %s", r.stderr)
	}
	first := starflowCmd(t, dir, nil, "enqueue", "three", "--input", `{"n": 4}`, "--idempotency-key", "k1", "--db", "w.db")
	again := starflowCmd(t, dir, nil, "enqueue", "three", "--input", `{"n": 4}`, "--idempotency-key", "k1", "--db", "w.db")
	id := strings.TrimSpace(first.stdout)
	if first.code != 0 || len(id) != 36 || strings.TrimSpace(again.stdout) != id {
		t.Fatalf("enqueue: %q / %q %s %s", first.stdout, again.stdout, first.stderr, again.stderr)
	}
	if r := starflowCmd(t, dir, nil, "enqueue", "nope", "--db", "w.db"); r.code != 1 || !strings.Contains(r.stderr, `no workflow named "nope"`) {
		t.Fatalf("unknown workflow: %d %s", r.code, r.stderr)
	}

	w := exec.Command(binary, "worker", "--db", "w.db", "--poll-interval", "50ms")
	w.Dir = dir
	w.Env = os.Environ()
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := starflowCmd(t, dir, nil, "runs", "show", id, "--db", "w.db", "--json")
		if strings.Contains(r.stdout, `"status": "succeeded"`) {
			if !strings.Contains(r.stdout, `"output": 8`) {
				t.Fatalf("output: %s", r.stdout)
			}
			break
		}
		if time.Now().After(deadline) {
			w.Process.Kill()
			w.Wait()
			t.Fatalf("run not executed by the worker: %s", r.stdout)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- w.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("worker exit: %v", err)
		}
	case <-time.After(30 * time.Second):
		w.Process.Kill()
		t.Fatal("worker did not stop on SIGTERM")
	}
}

// TestCLIHeartbeatOverHalfTheTTLRefused: worker and dev refuse a
// --heartbeat longer than half of --lease-ttl before opening anything,
// naming both flags and the largest heartbeat allowed.
func TestCLIHeartbeatOverHalfTheTTLRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"worker", "--lease-ttl", "1s", "--heartbeat", "900ms"},
		{"worker", "--lease-ttl", "30s", "--heartbeat", "27s"},
		{"dev", "--lease-ttl", "10s", "--heartbeat", "6s", "--addr", "127.0.0.1:0"},
		{"worker", "--lease-ttl", "0s"},
	} {
		r := starflowCmd(t, dir, nil, append(args, "--db", "hb.db")...)
		want, flag := "more than half of --lease-ttl", "--heartbeat"
		if args[2] == "0s" {
			want, flag = "--lease-ttl 0s is out of range: it must be more than 0s", "--lease-ttl"
		}
		if r.code != 2 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, flag) {
			t.Fatalf("%v: exit %d, stderr %q; want exit 2 and %q", args, r.code, r.stderr, want)
		}
	}
	if _, err := os.Stat(dir + "/hb.db"); err == nil {
		t.Fatal("a refused command created the database")
	}
}
