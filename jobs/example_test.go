package jobs_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/client"
	"github.com/starflow/starflow/internal/httpserver"
	"github.com/starflow/starflow/jobs"
	"github.com/starflow/starflow/state/sqlitestore"
)

// Greeting is the input and the output of job type uppercase.
type Greeting struct {
	Text string `json:"text"`
}

// A worker serves the `job` steps of type uppercase: the run parks at the
// step until the worker, polling the server over HTTP, completes it with
// its handler's output.
func ExampleHandle() {
	ctx := context.Background()
	// A Starflow server — an engine on SQLite and its HTTP API, what
	// `starflow dev` serves — with a workflow that has a job step.
	dir, _ := os.MkdirTemp("", "starflow-jobs-example-")
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(sqlitestore.Config{Path: filepath.Join(dir, "starflow.db"), Logger: quietLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	_ = store.Migrate(ctx)
	eng, _ := starflow.New(starflow.Config{Store: store, Maintenance: true, Logger: quietLogger()})
	_ = eng.Start(ctx)
	defer eng.Stop(ctx)
	api, _ := httpserver.New(httpserver.Config{Backend: eng, Logger: quietLogger(), API: &httpserver.APIConfig{Engine: eng}})
	srv := httptest.NewServer(api)
	defer srv.Close()
	if _, err := eng.Apply(ctx, "greet.yaml", []byte(`name: greet
steps:
  - id: shout
    job: {type: uppercase, input: {text: "${{ 'hello, ' + input.name }}"}}
output: "${{ steps.shout.output.text }}"
`)); err != nil {
		fmt.Println(err)
		return
	}

	// The worker: any process that reaches the server's API.
	w, err := jobs.NewWorker(client.New(srv.URL, ""), jobs.Options{Concurrency: 4, Logger: quietLogger()})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = jobs.Handle(w, "uppercase", func(ctx context.Context, job *jobs.Job, in Greeting) (Greeting, error) {
		job.Progress(0.5, "shouting")
		return Greeting{Text: strings.ToUpper(in.Text)}, nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	wctx, stop := context.WithCancel(ctx)
	stopped := make(chan error)
	go func() { stopped <- w.Run(wctx) }()

	run, _ := eng.Enqueue(ctx, "greet", map[string]any{"name": "ada"}, nil)
	run, _ = eng.WaitRun(ctx, run.ID)
	fmt.Println(run.Status, string(run.Output))
	stop() // as on SIGTERM: no more polls, running jobs get the grace
	fmt.Println("worker stopped:", <-stopped)
	// Output:
	// succeeded "HELLO, ADA"
	// worker stopped: <nil>
}
