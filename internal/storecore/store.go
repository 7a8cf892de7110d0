package storecore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/starflow/starflow/internal/faultpoint"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// Defaults of Config.
const (
	// SweepLockTimeoutDefault is the default Config.SweepLockTimeout.
	SweepLockTimeoutDefault = 2 * time.Second
	// MaxBatchDefault is the default Config.MaxBatch.
	MaxBatchDefault = 256
	// BatchLockTimeoutDefault is the default Config.BatchLockTimeout.
	BatchLockTimeoutDefault = 5 * time.Second
	// PipelinesDefault is the default Config.Pipelines.
	PipelinesDefault = 1
)

// Config configures a Store.
type Config struct {
	// Name starts every error of the store ("sqlitestore: claim: …").
	// Default: the dialect's name.
	Name string
	// Hooks run inside every write transaction (state.TxHook).
	Hooks []state.TxHook
	// BlobThreshold is the size (bytes) above which a checkpoint's output
	// or context delta goes to workflow_blobs by sha256. Default
	// state.BlobThresholdDefault (256 KiB).
	BlobThreshold int
	// SweepLockTimeout bounds each lock wait of the lease sweep's
	// transaction (TxOptions.LockTimeout), a second guard beside SKIP
	// LOCKED. Default SweepLockTimeoutDefault (2 s).
	SweepLockTimeout time.Duration
	// MaxBatch bounds the writes one group commit takes. Default
	// MaxBatchDefault (256).
	MaxBatch int
	// BatchLockTimeout bounds each lock wait of a PostgreSQL batch of
	// step writes (TxOptions.LockTimeout), so one run whose row another
	// transaction holds cannot stall every step write of the process: the
	// batch fails after it and its writes are made one by one. Default
	// BatchLockTimeoutDefault (5 s), below the lease TTL.
	BatchLockTimeout time.Duration
	// Pipelines bounds the group commits in flight at once on a dialect
	// that takes several writers (PostgreSQL; a single-writer dialect runs
	// one). Default PipelinesDefault (1: measured, more batches in flight
	// only made each smaller on a PostgreSQL that is CPU-bound; a server
	// whose commits wait on a slow disk may gain from more).
	Pipelines int
	// Logger receives the store's warnings. Default: discard.
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.BlobThreshold <= 0 {
		c.BlobThreshold = state.BlobThresholdDefault
	}
	if c.SweepLockTimeout <= 0 {
		c.SweepLockTimeout = SweepLockTimeoutDefault
	}
	if c.MaxBatch <= 0 {
		c.MaxBatch = MaxBatchDefault
	}
	if c.BatchLockTimeout <= 0 {
		c.BatchLockTimeout = BatchLockTimeoutDefault
	}
	if c.Pipelines <= 0 {
		c.Pipelines = PipelinesDefault
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c
}

// Store implements state.Adapter's operations (but Capabilities and
// Migrate, which the stores supply), state.Outbox and the hooks' HookTx
// once, over a Dialect. It is safe for concurrent use.
type Store struct {
	d       Dialect
	queries map[string]string
	cfg     Config
	batch   StepBatcher // nil when the dialect has none
	commit  *committer  // nil when writes need no group commit
	drain   drainState
	close   sync.Once
}

// New returns a Store over d. A single-writer dialect gets a group
// committer for every write; a StepBatcher dialect gets one for the step
// writes. Close stops it and closes d.
func New(d Dialect, cfg Config) *Store {
	s := &Store{d: d, queries: d.Queries(), cfg: cfg.WithDefaults()}
	if s.cfg.Name == "" {
		s.cfg.Name = d.Name()
	}
	s.batch, _ = d.(StepBatcher)
	if d.SingleWriter() || s.batch != nil {
		s.commit = newCommitter(s)
	}
	s.drain.owner = newOwner()
	return s
}

// Dialect returns the store's dialect.
func (s *Store) Dialect() Dialect { return s.d }

// Close stops the group committer (waiting for the writes it holds) and
// closes the dialect's connections. Closing twice is safe.
func (s *Store) Close() error {
	var err error
	s.close.Do(func() {
		if s.commit != nil {
			s.commit.stop()
		}
		err = s.d.Close()
	})
	return err
}

// txn is one write transaction and the Change it accumulates for hooks.
type txn struct {
	s  *Store
	tx Tx
	ch *state.Change
	// idle: the transaction wrote nothing (a claim that found no run, a
	// duplicate enqueue), so no hook runs for it.
	idle bool
	// notify lists the pools to wake when the transaction commits.
	notify []string
}

// runMeta is what the fence (and the other run reads of a write) return
// about a run.
type runMeta struct {
	id             string // canonical
	workspace, env string
	attempt        int
	cancel         bool   // cancel_requested
	status         string // before the write
	parent         string // parent_run_id, "" when none
	maxAttempts    int
	mode           string // recovery_mode
	pool           string // runner_pool, "" when any
}

// retryTries bounds the runs of a write that the dialect calls Retryable.
const retryTries = 3

// write runs fn as one write: through the group committer on a
// single-writer dialect, else in a transaction of its own, run again when
// the dialect calls its failure retryable (fn must then be safe to run
// again: it assigns its results).
//
// When readRun is set or hooks need it, the run the Change names
// (t.ch.RunID, which fn may set) is read inside the transaction after fn's
// writes and returned, unless fn already set t.ch.Run from a RETURNING
// clause. A method that returns the run it wrote thus reports exactly what
// it committed.
//
// Errors are returned unprefixed: every caller wraps them with its own
// "<dialect>: <operation>:" prefix.
func (s *Store) write(ctx context.Context, op state.Op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	return s.writeOpts(ctx, TxOptions{}, op, runID, readRun, fn)
}

func (s *Store) writeOpts(ctx context.Context, opts TxOptions, op state.Op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	if err := faultpoint.Check(ctx, "op:", string(op)); err != nil {
		return nil, err
	}
	if s.d.SingleWriter() {
		return s.commit.do(ctx, &job{op: op, runID: runID, readRun: readRun, fn: fn, opts: opts})
	}
	return s.writeAlone(ctx, opts, op, runID, readRun, fn)
}

// writeAlone is write in a transaction of its own.
func (s *Store) writeAlone(ctx context.Context, opts TxOptions, op state.Op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	for try := 1; ; try++ {
		run, err := s.writeOnce(ctx, opts, op, runID, readRun, fn)
		if err == nil || try == retryTries || ctx.Err() != nil || !s.d.Retryable(err) {
			return run, err
		}
	}
}

func (s *Store) writeOnce(ctx context.Context, opts TxOptions, op state.Op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	tx, err := s.begin(ctx, opts)
	if err != nil {
		return nil, err
	}
	run, err := s.within(ctx, tx, op, runID, readRun, fn)
	if err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, err
	}
	faultpoint.Hit(s.d.Name() + "." + string(op) + ".before_commit")
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return run, nil
}

// begin opens a write transaction of named queries.
// It is the fault point "begin".
func (s *Store) begin(ctx context.Context, opts TxOptions) (Tx, error) {
	if err := faultpoint.Check(ctx, "begin", ""); err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	c, err := s.d.Begin(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", s.d.Translate(err))
	}
	return s.named(c), nil
}

// reader runs named queries outside any write transaction.
func (s *Store) reader() Querier { return s.named(s.d.Reader()) }

// within runs the write fn on tx, an open transaction the caller commits
// (pgstore's EnqueueTx): fn, then the run read back, the notifications
// and the hooks. It neither commits nor rolls back.
func (s *Store) within(ctx context.Context, tx Tx, op state.Op, runID string, readRun bool, fn func(t *txn) error) (*starflowtype.Run, error) {
	t := &txn{s: s, tx: tx, ch: &state.Change{Op: op, RunID: runID}}
	if err := fn(t); err != nil {
		return nil, err
	}
	hooks := s.cfg.Hooks
	if t.idle {
		hooks = nil
	}
	if t.ch.RunID != "" && t.ch.Run == nil && (readRun || len(hooks) > 0) {
		r, err := getRun(ctx, tx, "", t.ch.RunID)
		if err != nil {
			return nil, fmt.Errorf("read back run: %w", err)
		}
		t.ch.Run = r
	}
	if len(t.notify) > 0 {
		if err := s.d.Notify(ctx, tx.Conn(), t.notify); err != nil {
			return nil, fmt.Errorf("notify: %w", err)
		}
	}
	for _, h := range hooks {
		if err := h(ctx, hookTx{tx}, t.ch); err != nil {
			return nil, hookError{err}
		}
	}
	if t.ch.Run == nil {
		return nil, nil
	}
	run := *t.ch.Run // the caller's copy: hooks keep theirs
	return &run, nil
}

// hookError is a hook's refusal of a write.
type hookError struct{ error }

func (e hookError) Error() string { return "hook: " + e.error.Error() }
func (e hookError) Unwrap() error { return e.error }

// lost is the error of a fence that matched no row.
func lost(runID string, l starflowtype.Lease) error {
	return fmt.Errorf("run %s, runner %s, epoch %d: %w", runID, l.RunnerID, l.Epoch, starflowtype.ErrLeaseLost)
}

// fence is the conditional write of SPEC §4: it matches exactly one row or
// returns ErrLeaseLost. It is the first statement of the transaction and
// takes the run's row lock, so a runner's writes to one run serialise.
func (t *txn) fence(ctx context.Context, runID string, l starflowtype.Lease) (runMeta, error) {
	return t.fenceMark(ctx, runID, l, 0)
}

// What a run's end must clean up (workflow_runs.end_work): the writes
// that leave such rows mark the run in their fence, and a run that never
// did skips the statements at its end.
const (
	endSessionVars = 1
	endWaits       = 2
)

// fenceMark is fence, also marking the run's end_work with mark (0: none).
func (t *txn) fenceMark(ctx context.Context, runID string, l starflowtype.Lease, mark int) (runMeta, error) {
	var m runMeta
	id, ok := CanonicalID(runID)
	if !ok {
		return m, lost(runID, l) // no such run can exist
	}
	m.id = id
	if t.ch.RunID == runID {
		t.ch.RunID = id
	}
	query, args := "fence", []any{id, l.RunnerID, l.Epoch}
	if mark != 0 {
		query, args = "fence_mark", append(args, mark)
	}
	err := t.tx.QueryRow(ctx, query, args...).Scan(&m.workspace, &m.env, &m.attempt, &m.cancel, &m.status, &m.parent,
		&m.maxAttempts, &m.mode, &m.pool)
	if errors.Is(err, ErrNoRows) {
		return m, lost(runID, l)
	}
	if err != nil {
		return m, fmt.Errorf("fence: %w", err)
	}
	return m, nil
}

// blobbed stores data in workflow_blobs when it is larger than the
// threshold. It returns what the row keeps in the JSON column (data
// itself, or the reference placeholder) and the blob column's value (the
// sha256, or "" when data is inline): only that column marks a reference
// (state.BlobRef).
func (s *Store) blobbed(data []byte, blobs *[]Blob) ([]byte, string) {
	if len(data) <= s.cfg.BlobThreshold {
		return data, ""
	}
	ref, sum := state.BlobRef(data)
	*blobs = append(*blobs, Blob{Sum: sum, Data: data})
	return ref, sum
}

// event appends one workflow_run_events row and records it in the Change;
// attempt 0 is m's.
func (t *txn) event(ctx context.Context, m runMeta, runID string, attempt int, typ starflowtype.EventType, node, scope string, payload json.RawMessage) error {
	if attempt == 0 {
		attempt = m.attempt
	}
	ev := &starflowtype.Event{RunID: runID, Attempt: attempt, Type: typ, NodeID: node, ScopePath: scope, Payload: payload}
	err := t.tx.QueryRow(ctx, "insert_event", runID, m.workspace, m.env, attempt, string(typ),
		nullString(node), scope, payload).Scan(&ev.ID, &ev.CreatedAt)
	if err != nil {
		return fmt.Errorf("insert %s event: %w", typ, err)
	}
	t.ch.Events = append(t.ch.Events, ev)
	return nil
}

// eventPair appends two run-level events of run m in one statement
// (insert_event_pair), a before b.
func (t *txn) eventPair(ctx context.Context, m runMeta, a, b EventIn) error {
	rows, err := t.tx.Query(ctx, "insert_event_pair", m.id, m.workspace, m.env, m.attempt, nil, "",
		string(a.Type), a.Payload, string(b.Type), b.Payload)
	if err != nil {
		return fmt.Errorf("insert %s and %s events: %w", a.Type, b.Type, err)
	}
	defer rows.Close()
	for _, e := range []EventIn{a, b} {
		ev := &starflowtype.Event{RunID: m.id, Attempt: m.attempt, Type: e.Type, Payload: e.Payload}
		if !rows.Next() {
			return fmt.Errorf("insert %s and %s events: %w", a.Type, b.Type, cmp.Or(rows.Err(), ErrNoRows))
		}
		if err := rows.Scan(&ev.ID, &ev.CreatedAt); err != nil {
			return fmt.Errorf("insert %s and %s events: %w", a.Type, b.Type, err)
		}
		t.ch.Events = append(t.ch.Events, ev)
	}
	rows.Close()
	return rows.Err()
}

func isNoRows(err error) bool { return errors.Is(err, ErrNoRows) }

// mustAffect runs a statement that must change exactly one row;
// ErrConflict when it changes none.
func (t *txn) mustAffect(ctx context.Context, name string, args ...any) error {
	n, err := t.tx.Exec(ctx, name, args...)
	if err != nil {
		return err
	}
	if n != 1 {
		return starflowtype.ErrConflict
	}
	return nil
}

// CanonicalID returns id in canonical form (lower case, hyphens), the form
// every id is stored and read in, and whether it is a uuid at all: an id
// that is not names no row. It accepts the forms both uuid.Parse and
// PostgreSQL accept (not uuid.Parse's "urn:uuid:" prefix).
func CanonicalID(id string) (string, bool) {
	u, err := uuid.Parse(id)
	if err != nil || len(id) == len("urn:uuid:")+36 {
		return "", false
	}
	return u.String(), true
}

// checkID is CanonicalID for an id a caller supplies to be stored.
func checkID(what, id string) (string, error) {
	c, ok := CanonicalID(id)
	if !ok {
		return "", fmt.Errorf("%s %q is not a uuid", what, id)
	}
	return c, nil
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func jsonOr(b json.RawMessage, empty string) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage(empty)
	}
	return b
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// instant is t, or NULL when zero.
func instant(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC()
}

// offset is d as an offset from the database's now, or NULL when not
// positive.
func offset(d time.Duration) any {
	if d <= 0 {
		return nil
	}
	return d
}

func marshal(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
