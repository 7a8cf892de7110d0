//go:build chaos

package chaos

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/starflow/starflow/client"
)

// Timings of the deployment: short leases and sweeps, so that a lost
// runner's runs move on within seconds and a short run sees many
// recoveries. They are flags of the real commands, not test hooks.
const (
	leaseTTL  = "4s"
	heartbeat = "1s"
)

// maintenanceFlags are given to every process: any of them may lead.
var maintenanceFlags = []string{"--sweep-interval", "1s", "--timer-interval", "500ms", "--leader-ttl", "2s",
	"--warm-sweep-interval", "3s", "--log-format", "json"}

// deployment is one harness's Starflow: its cluster, its NATS, its
// service, its processes.
type deployment struct {
	t                 *testing.T
	bin               string
	dir               string
	pg                *pgCluster
	nats              *natsServer
	svc               *service
	db                *pgxpool.Pool
	storeURL, warmURL string
	serverPort        int
	serverURL         string
	opKey, workerKey  string
	server, remote    *proc
	workers           []*proc
	seed              uint64
	faultsOn          atomic.Bool  // processes started now get STARFLOW_FAULTS
	skew              atomic.Int64 // worker-3's clock skew, ns
	wakeKeys          string
	clientMu          sync.Mutex
	op                *client.Client
	mu                sync.Mutex
	injected          map[string]int             // storage faults by action, from the processes' stderr
	injectedPoints    map[string]int             // … by point
	runnerIDs         map[string]map[string]bool // process name → runner ids it started as
	startedLine       *regexp.Regexp
	faultLine         *regexp.Regexp
}

func newDeployment(t *testing.T, ctx context.Context, seed uint64) *deployment {
	t.Helper()
	bin, workerBin := buildBinaries(t)
	d := &deployment{t: t, bin: bin, dir: t.TempDir(), seed: seed,
		injected: map[string]int{}, injectedPoints: map[string]int{}, runnerIDs: map[string]map[string]bool{},
		startedLine: regexp.MustCompile(`^(worker|server) (\S+) started on `),
		faultLine:   regexp.MustCompile(`^faultpoint injected point=(\S+) action=(\S+)`)}
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(seed>>uint(i%8)) ^ byte(i*37)
	}
	d.wakeKeys = "STARFLOW_WAKE_KEYS=chaos:" + base64.StdEncoding.EncodeToString(key)

	d.pg = startPG(t)
	d.storeURL = d.pg.url()
	d.nats = startNATS(t, d.sink)
	d.warmURL = "nats://127.0.0.1:" + strconv.Itoa(d.nats.port)
	pool, err := pgxpool.New(ctx, d.storeURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	d.db = pool

	if _, err := runCLI(ctx, bin, nil, "migrate", "--store", d.storeURL); err != nil {
		t.Fatal(err)
	}
	d.opKey = d.createKey(ctx, "chaos-operator", "operator")
	d.workerKey = d.createKey(ctx, "chaos-remote-worker", "worker")
	d.svc = startService(t, ctx, seed, 0.15)
	d.svc.wakeTo = d.client
	for _, name := range []string{"chaos-child", "chaos-linear", "chaos-fanout", "chaos-parallel", "chaos-race",
		"chaos-try", "chaos-waits", "chaos-job", "chaos-tick"} {
		path := filepath.Join(d.dir, name+".yaml")
		if err := os.WriteFile(path, []byte(definition(name, d.svc.url)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := runCLI(ctx, bin, nil, "apply", path, "--store", d.storeURL); err != nil {
			t.Fatal(err)
		}
	}

	d.serverPort = freePort(t)
	d.serverURL = "http://127.0.0.1:" + strconv.Itoa(d.serverPort)
	d.server = &proc{name: "server", path: bin, dir: d.dir, sink: d.sink, env: d.processEnv("server"),
		args: append([]string{"server", "--store", d.storeURL, "--warm", d.warmURL,
			"--addr", "127.0.0.1:" + strconv.Itoa(d.serverPort), "--wake-rate", "0"}, maintenanceFlags...)}
	for i := 1; i <= 3; i++ {
		name := "worker-" + strconv.Itoa(i)
		d.workers = append(d.workers, &proc{name: name, path: bin, dir: d.dir, sink: d.sink, env: d.processEnv(name),
			args: append([]string{"worker", "--store", d.storeURL, "--warm", d.warmURL, "--allow-env", "CHAOS_WORKER",
				"--lease-ttl", leaseTTL, "--heartbeat", heartbeat, "--poll-interval", "200ms", "--concurrency", "8",
				"--grace", "2s"}, maintenanceFlags...)})
	}
	d.remote = &proc{name: "remote-worker", path: workerBin, dir: d.dir, sink: d.sink,
		env: func() []string {
			return []string{"STARFLOW_SERVER=" + d.serverURL, "STARFLOW_API_KEY=" + d.workerKey, "WORKER_ID=chaos-remote", "SHUTDOWN_GRACE=1s"}
		}}
	for _, p := range d.all() {
		if err := p.start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range d.all() {
			p.kill()
		}
	})
	if !tcpUp(d.serverPort, 60*time.Second) {
		t.Fatalf("the server did not listen within 60 s:\n%s", d.server.tail())
	}
	return d
}

// all is every Starflow process (NATS and PostgreSQL apart).
func (d *deployment) all() []*proc {
	return append([]*proc{d.server, d.remote}, d.workers...)
}

func (d *deployment) createKey(ctx context.Context, name, role string) string {
	d.t.Helper()
	out, err := runCLI(ctx, d.bin, nil, "keys", "create", "--name", name, "--role", role, "--workspace", "default", "--store", d.storeURL)
	if err != nil {
		d.t.Fatal(err)
	}
	key := strings.TrimSpace(out)
	if !strings.HasPrefix(key, "sf_") {
		d.t.Fatalf("keys create printed %q, not a key", out)
	}
	return key
}

// client is an operator's client of the server.
func (d *deployment) client() *client.Client {
	d.clientMu.Lock()
	defer d.clientMu.Unlock()
	if d.op == nil {
		d.op = client.New(d.serverURL, d.opKey)
	}
	return d.op
}

// processEnv is the environment of a Starflow process at each start: the
// shared wake-key ring, and while faults are on the storage-fault rules
// (seeded per process and start) and, for worker-3, a skewed clock.
func (d *deployment) processEnv(name string) func() []string {
	var starts atomic.Uint64
	return func() []string {
		env := []string{d.wakeKeys, "CHAOS_WORKER=" + name}
		n := starts.Add(1)
		if !d.faultsOn.Load() {
			return env
		}
		seed := d.seed*1000003 + n*7919 + uint64(len(name))*31 + uint64(name[len(name)-1])
		env = append(env, "STARFLOW_FAULTS="+faultRules(seed, name == "server"))
		if name == "worker-3" {
			if s := time.Duration(d.skew.Load()); s != 0 {
				env = append(env, "STARFLOW_CHAOS_CLOCK_SKEW="+s.String())
			}
		}
		return env
	}
}

// faultRules are the storage faults a process injects on itself through
// the fault layer (docs/faults.md): a heartbeat or any query that hangs
// for 5 s (past the lease), failed queries and commits, slow writes. A
// run's lease is mostly extended by its step writes, so heartbeats are
// rare and the general hang rule gives most hangs. The server, which executes no
// runs, gets fewer.
func faultRules(seed uint64, server bool) string {
	if server {
		return fmt.Sprintf("seed=%d; query:*=fail@p0.0005; op:*=delay:100ms@p0.003", seed)
	}
	return fmt.Sprintf("seed=%d; query:refresh_lease=hang:5s@p0.01; query:*=hang:5s@p0.0002; commit=fail@p0.0008; query:*=fail@p0.0004; op:*=delay:150ms@p0.003", seed)
}

// sink reads every line a process prints: the fault layer's injections
// and the runner ids.
func (d *deployment) sink(name, line string) {
	if m := d.faultLine.FindStringSubmatch(line); m != nil {
		d.mu.Lock()
		d.injected["storage_"+m[2]]++
		d.injectedPoints[m[1]+" "+m[2]]++
		d.mu.Unlock()
		return
	}
	if m := d.startedLine.FindStringSubmatch(line); m != nil {
		d.mu.Lock()
		if d.runnerIDs[name] == nil {
			d.runnerIDs[name] = map[string]bool{}
		}
		d.runnerIDs[name][m[2]] = true
		d.mu.Unlock()
	}
}

// runnerIDsOf is every runner id process name started as.
func (d *deployment) runnerIDsOf(name string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var ids []string
	for id := range d.runnerIDs[name] {
		ids = append(ids, id)
	}
	return ids
}

// healAll thaws and starts again every process, NATS and PostgreSQL
// included, that a fault left stopped or dead.
func (d *deployment) healAll() {
	for _, p := range append(d.all(), d.nats.proc) {
		p.signal(syscall.SIGCONT)
		if !p.running() {
			if err := p.start(); err != nil {
				d.t.Errorf("restart %s: %v", p.name, err)
			}
		}
	}
	if !tcpUp(d.pg.port, time.Second) {
		if err := d.pg.start(); err != nil {
			d.t.Errorf("restart PostgreSQL: %v", err)
		}
	}
}

// restartAll stops every Starflow process gracefully and starts it again
// (with the fault rules of the moment).
func (d *deployment) restartAll() {
	var wg sync.WaitGroup
	for _, p := range d.all() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stopGracefully(10 * time.Second)
			if err := p.start(); err != nil {
				d.t.Errorf("restart %s: %v", p.name, err)
			}
		}()
	}
	wg.Wait()
}
