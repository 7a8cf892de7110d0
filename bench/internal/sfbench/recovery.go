package sfbench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/starflow/starflow"
	"github.com/starflow/starflow/bench/internal/workload"
	"github.com/starflow/starflow/state/pgstore"
)

// RecoveryConfig tunes the SIGKILL recovery measurement.
type RecoveryConfig struct {
	PGURL     string
	Binary    string        // the starflow binary ("" = build it)
	Runs      int           // runs in flight on the victim when it is killed
	LeaseTTL  time.Duration // workers' --lease-ttl
	Heartbeat time.Duration // workers' --heartbeat
	Sweep     time.Duration // server's --sweep-interval
	StepDelay time.Duration // how long the counter holds each step's request
	Mode      string        // the workflow's recovery_mode (resume: committed steps are not run again)
}

// RecoveryResult is what the measurement found.
type RecoveryResult struct {
	Runs          int
	InFlight      int           // runs not yet succeeded at the SIGKILL
	Recovery      time.Duration // SIGKILL → last run's end (database clock)
	Executions    int           // step requests the counter received
	StepsTwice    int           // steps (idempotency keys) executed more than once
	MaxExecutions int           // the most any one step was executed
	Reclaimed     int           // runs claimed more than once (lease epoch > 1)
	ExtraClaims   int           // claims beyond each run's first (sum of lease epoch − 1)
}

// counter is the local HTTP service every step calls: it counts the
// executions of each step by its Idempotency-Key (<run>/<scope>/<step>),
// and holds each request for delay, so runs are in flight when the worker
// is killed.
type counter struct {
	delay time.Duration
	mu    sync.Mutex
	hits  map[string]int
	runs  map[string]bool
	want  int
	ready chan struct{} // closed once `want` distinct runs have called
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	run, _, _ := strings.Cut(key, "/")
	c.mu.Lock()
	c.hits[key]++
	if !c.runs[run] {
		c.runs[run] = true
		if len(c.runs) == c.want {
			close(c.ready)
		}
	}
	c.mu.Unlock()
	select {
	case <-time.After(c.delay):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// process is a starflow subprocess; its stderr is scanned for the
// "started on" line.
type process struct {
	cmd     *exec.Cmd
	started chan struct{}
	exited  chan struct{}
	mu      sync.Mutex
	log     []string
}

func startProcess(bin string, args ...string) (*process, error) {
	p := &process{cmd: exec.Command(bin, args...), started: make(chan struct{}), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), "STARFLOW_WAKE_KEYS="+WakeKeys)
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout = io.Discard
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.log = append(p.log, line)
			if len(p.log) > 20 {
				p.log = p.log[1:]
			}
			p.mu.Unlock()
			if strings.Contains(line, " started on ") {
				once.Do(func() { close(p.started) })
			}
		}
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitStarted waits for the "started on" line.
func (p *process) waitStarted(ctx context.Context) error {
	select {
	case <-p.started:
		return nil
	case <-p.exited:
	case <-ctx.Done():
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Errorf("%s did not start: %s", strings.Join(p.cmd.Args[:2], " "), strings.Join(p.log, "\n"))
}

// stop sends SIGTERM (SIGKILL after 15 s) and waits for the exit.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// buildStarflow builds cmd/starflow of the module the harness uses (the
// tree around bench/, by the replace directive) and returns the binary's
// path. The binary is kept in the user's cache directory: go build relinks
// it only when the tree changed.
func buildStarflow(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/starflow/starflow").Output()
	if err != nil {
		return "", fmt.Errorf("locate the starflow module: %w", err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "starflow-sidebyside")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "starflow")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/starflow")
	cmd.Dir = strings.TrimSpace(string(out))
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/starflow: %w: %s", err, b)
	}
	return bin, nil
}

// Recovery: a `starflow server` (the lease sweep) and one `starflow
// worker` (the victim, --concurrency = Runs) on a fresh PostgreSQL schema;
// Runs runs of a 10-step workflow whose steps are service_calls to the
// counter; once every run has called it (all in flight on the victim), a
// second worker (the survivor) starts, the victim gets SIGKILL, and the
// measurement is the time from the SIGKILL to the last run's end, both on
// the database clock, and how many steps the counter saw executed twice.
func Recovery(ctx context.Context, rc RecoveryConfig) (RecoveryResult, error) {
	res := RecoveryResult{Runs: rc.Runs}
	bin := rc.Binary
	if bin == "" {
		var err error
		if bin, err = buildStarflow(ctx); err != nil {
			return res, err
		}
	}

	cnt := &counter{delay: rc.StepDelay, hits: map[string]int{}, runs: map[string]bool{}, want: rc.Runs, ready: make(chan struct{})}
	srv := httptest.NewServer(cnt)
	defer srv.Close()

	schema := workload.NewName("sbs_recovery")
	store, err := pgstore.Open(ctx, pgstore.Config{URL: rc.PGURL, Schema: schema})
	if err != nil {
		return res, err
	}
	defer func() { store.Close(); _ = workload.DropSchema(ctx, rc.PGURL, schema) }()
	if err := store.Migrate(ctx); err != nil {
		return res, err
	}
	client, err := starflow.New(starflow.Config{Store: store, NoRunner: true, Logger: workload.DiscardLogger, WakeKeys: WakeKeys})
	if err != nil {
		return res, err
	}
	var def strings.Builder
	fmt.Fprintf(&def, "name: sbs-recovery\nrecovery_mode: %s\nsteps:\n", rc.Mode)
	for i := 0; i < workload.StepsPerRun; i++ {
		fmt.Fprintf(&def, "  - id: %s\n    service_call:\n      method: POST\n      url: %q\n      body: {step: %s}\n",
			workload.StepName(i), srv.URL+"/step", workload.StepName(i))
	}
	if _, err := client.Apply(ctx, "recovery.yaml", []byte(def.String())); err != nil {
		return res, err
	}

	u, err := url.Parse(rc.PGURL)
	if err != nil {
		return res, err
	}
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	storeURL := u.String()
	workerArgs := []string{"worker", "--store", storeURL, "--concurrency", strconv.Itoa(rc.Runs),
		"--lease-ttl", rc.LeaseTTL.String(), "--heartbeat", rc.Heartbeat.String(), "--poll-interval", "100ms"}

	var procs []*process
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	start := func(args ...string) (*process, error) {
		p, err := startProcess(bin, args...)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return p, p.waitStarted(sctx)
	}
	if _, err := start("server", "--store", storeURL, "--sweep-interval", rc.Sweep.String(), "--addr", "127.0.0.1:0"); err != nil {
		return res, err
	}
	victim, err := start(workerArgs...)
	if err != nil {
		return res, err
	}
	ids := make([]string, rc.Runs)
	for i := range ids {
		run, err := client.Enqueue(ctx, "sbs-recovery", nil, nil)
		if err != nil {
			return res, err
		}
		ids[i] = run.ID
	}
	select {
	case <-cnt.ready:
	case <-time.After(2 * time.Minute):
		return res, errors.New("the runs did not all start on the victim within 2 minutes")
	case <-ctx.Done():
		return res, ctx.Err()
	}
	if _, err := start(workerArgs...); err != nil {
		return res, err
	}

	conn, err := pgx.Connect(ctx, rc.PGURL)
	if err != nil {
		return res, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var killedAt time.Time
	err = conn.QueryRow(ctx, `SELECT clock_timestamp(), count(*) FILTER (WHERE status <> 'succeeded') FROM `+
		pgx.Identifier{schema}.Sanitize()+`.workflow_runs`).Scan(&killedAt, &res.InFlight)
	if err != nil {
		return res, err
	}
	if err := victim.cmd.Process.Kill(); err != nil {
		return res, err
	}
	<-victim.exited

	var last time.Time
	for _, id := range ids {
		run, err := client.WaitRun(ctx, id)
		if err != nil {
			return res, fmt.Errorf("wait for run %s: %w", id, err)
		}
		if run.Status != "succeeded" {
			return res, fmt.Errorf("run %s ended %s: %s", id, run.Status, run.Error)
		}
		if run.LeaseEpoch > 1 {
			res.Reclaimed++
			res.ExtraClaims += int(run.LeaseEpoch - 1)
		}
		if run.CompletedAt.After(last) {
			last = run.CompletedAt
		}
	}
	res.Recovery = last.Sub(killedAt)

	cnt.mu.Lock()
	defer cnt.mu.Unlock()
	for _, n := range cnt.hits {
		res.Executions += n
		if n > 1 {
			res.StepsTwice++
		}
		res.MaxExecutions = max(res.MaxExecutions, n)
	}
	if len(cnt.hits) != rc.Runs*workload.StepsPerRun {
		return res, fmt.Errorf("the counter saw %d distinct steps, want %d", len(cnt.hits), rc.Runs*workload.StepsPerRun)
	}
	return res, nil
}
