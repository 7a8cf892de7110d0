// Package jobs is a remote worker: a Go process that serves `job` steps
// (`job: {type: NAME, input: {…}}`) of a Starflow server over its HTTP API
// (docs/api.md, "Remote workers"), so a step can run on another machine,
// next to the resources it needs, in a process that holds no lease on any
// run.
//
//	c := client.New("https://starflow.example.com", os.Getenv("STARFLOW_API_KEY"))
//	w, err := jobs.NewWorker(c, jobs.Options{Concurrency: 4})
//	…
//	err = jobs.Handle(w, "resize", func(ctx context.Context, job *jobs.Job, in ResizeInput) (ResizeOutput, error) {
//		job.Progress(0.5, "half way")
//		return resize(ctx, in)
//	})
//	…
//	err = w.Run(ctx) // until ctx is cancelled (SIGTERM), then a graceful stop
//
// Run long-polls for jobs of the registered types, runs up to
// Options.Concurrency at once, each in its own goroutine, and keeps each
// one's lease with heartbeats (every third of the job's
// heartbeat_timeout). A handler's input is decoded from the job's JSON
// input into its In type and its Out is encoded as the step's output; a
// returned error fails the job (see Handle for how errors are typed and
// which are tried again). When the server refuses a heartbeat (409: the
// lease was lost, the run was cancelled) or no heartbeat got through in
// time, the handler's context is cancelled with a cause wrapping
// ErrLeaseLost, and whatever the handler returns then is dropped: another
// worker may hold the job now.
//
// A job's lease, not this process, is what the server trusts: a worker
// that dies mid-job (SIGKILL, a lost machine) loses the job after its
// heartbeat_timeout, the server's sweep queues it again and another worker
// claims it, with a new fencing token; a late completion with the old
// token is refused (409) and changes nothing. Job.IdempotencyKey is the
// same for every try, for handlers with side effects.
//
// Import rule: the standard library, package client (and api), step and
// starflowtype for the typed errors, workflow for the job type rule, and
// internal/backoff.
package jobs
