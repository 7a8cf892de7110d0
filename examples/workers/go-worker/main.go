// Command go-worker is a remote worker written with package jobs: it
// serves the job types uppercase and sleep of examples/workers/shout.yaml,
// as shell-worker.sh does, until SIGTERM or SIGINT, then stops gracefully
// (running jobs get SHUTDOWN_GRACE to finish).
//
//	STARFLOW_SERVER=http://127.0.0.1:8480 STARFLOW_API_KEY=sf_… go run ./examples/workers/go-worker
//
// Environment: STARFLOW_SERVER (default http://127.0.0.1:8480),
// STARFLOW_API_KEY (a key with role worker; empty: none), WORKER_ID
// (default host:pid), CONCURRENCY (default 4), SHUTDOWN_GRACE (a Go
// duration, default 30s).
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/jobs"
	"github.com/starflow/starflow/step"
)

// UppercaseInput is the input of job type uppercase.
type UppercaseInput struct {
	Text string `json:"text"`
}

// UppercaseOutput is its output.
type UppercaseOutput struct {
	Text string `json:"text"`
}

// SleepInput is the input of job type sleep: how long to sleep, in
// seconds.
type SleepInput struct {
	Seconds int `json:"seconds"`
}

// SleepOutput is its output: how long it slept, in seconds.
type SleepOutput struct {
	Slept int `json:"slept"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "go-worker:", err)
		os.Exit(1)
	}
}

func run() error {
	server := os.Getenv("STARFLOW_SERVER")
	if server == "" {
		server = "http://127.0.0.1:8480"
	}
	opts := jobs.Options{WorkerID: os.Getenv("WORKER_ID"), Concurrency: 4,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if s := os.Getenv("CONCURRENCY"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("CONCURRENCY %q is not a number", s)
		}
		opts.Concurrency = n
	}
	if s := os.Getenv("SHUTDOWN_GRACE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("SHUTDOWN_GRACE %q is not a duration (30s, 2m)", s)
		}
		opts.ShutdownGrace = d
	}
	w, err := jobs.NewWorker(client.New(server, os.Getenv("STARFLOW_API_KEY")), opts)
	if err != nil {
		return err
	}
	err = errors.Join(
		jobs.Handle(w, "uppercase", func(_ context.Context, _ *jobs.Job, in UppercaseInput) (UppercaseOutput, error) {
			if in.Text == "" {
				return UppercaseOutput{}, &step.Error{Type: "input_invalid", Message: "uppercase needs input.text, a string"}
			}
			return UppercaseOutput{Text: strings.ToUpper(in.Text)}, nil
		}),
		jobs.Handle(w, "sleep", func(ctx context.Context, job *jobs.Job, in SleepInput) (SleepOutput, error) {
			for i := range in.Seconds {
				select {
				case <-ctx.Done():
					return SleepOutput{}, context.Cause(ctx)
				case <-time.After(time.Second):
				}
				job.Progress(float64(i+1)/float64(in.Seconds), fmt.Sprintf("slept %d of %ds", i+1, in.Seconds))
			}
			return SleepOutput{Slept: in.Seconds}, nil
		}),
	)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Fprintf(os.Stderr, "go-worker %s: serving uppercase, sleep on %s\n", w.ID(), server)
	return w.Run(ctx)
}
