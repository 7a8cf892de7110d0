package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/starflow/starflow/warm"
)

// Defaults of Options.
const (
	PrefixDefault         = "starflow"
	OpTimeoutDefault      = 5 * time.Second
	ProgressMaxAgeDefault = 24 * time.Hour
	PresenceMaxAgeDefault = time.Hour
	ReconnectWaitDefault  = 250 * time.Millisecond
)

// maxCASAttempts bounds PutRun's read-compare-write loop; each conflict
// means another writer landed in between, so this is only reached under a
// pathological write storm on one run.
const maxCASAttempts = 1000

// Options configure a Store. The zero value is usable: WithDefaults fills
// every unset field.
type Options struct {
	// Prefix names the buckets <Prefix>_runs, _steps, _progress, _presence
	// and _session. Letters, digits, '-' and '_' only. Default "starflow".
	// Stores sharing a server and a prefix share their data.
	Prefix string
	// OpTimeout bounds every call (connect, each KV request, a listing),
	// unless the caller's context ends earlier. Default 5s.
	OpTimeout time.Duration
	// ProgressMaxAge is the progress bucket's MaxAge: a report older than
	// this is dropped by the server. Default 24h.
	ProgressMaxAge time.Duration
	// PresenceMaxAge is the presence bucket's MaxAge: the upper bound of a
	// PutPresence ttl, and how long a silent runner's entry is kept before
	// the server drops it (ListPresence hides it after its own ttl).
	// Default 1h.
	PresenceMaxAge time.Duration
	// Replicas is the buckets' replica count in a NATS cluster. Default 1.
	Replicas int
	// MemoryStorage keeps the buckets in server memory instead of files
	// (lost when the server restarts). Default false (file storage).
	MemoryStorage bool
	// ReconnectWait is the pause between reconnect attempts; the client
	// retries forever. Default 250ms.
	ReconnectWait time.Duration
	// Name is the client connection name shown by the server. Default
	// "starflow-warm".
	Name string
}

var prefixRE = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// WithDefaults returns o with every zero field set to its default.
func (o Options) WithDefaults() Options {
	if o.Prefix == "" {
		o.Prefix = PrefixDefault
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = OpTimeoutDefault
	}
	if o.ProgressMaxAge == 0 {
		o.ProgressMaxAge = ProgressMaxAgeDefault
	}
	if o.PresenceMaxAge == 0 {
		o.PresenceMaxAge = PresenceMaxAgeDefault
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.ReconnectWait == 0 {
		o.ReconnectWait = ReconnectWaitDefault
	}
	if o.Name == "" {
		o.Name = "starflow-warm"
	}
	return o
}

// Validate reports the first invalid field (after WithDefaults).
func (o Options) Validate() error {
	switch {
	case !prefixRE.MatchString(o.Prefix):
		return fmt.Errorf("warm/natskv: Options.Prefix %q: use letters, digits, '-' and '_' only", o.Prefix)
	case o.OpTimeout < 0:
		return fmt.Errorf("warm/natskv: Options.OpTimeout %v is negative", o.OpTimeout)
	case o.ProgressMaxAge < 0:
		return fmt.Errorf("warm/natskv: Options.ProgressMaxAge %v is negative", o.ProgressMaxAge)
	case o.PresenceMaxAge < 0:
		return fmt.Errorf("warm/natskv: Options.PresenceMaxAge %v is negative", o.PresenceMaxAge)
	case o.Replicas < 0 || o.Replicas > 5:
		return fmt.Errorf("warm/natskv: Options.Replicas %d is outside 1..5", o.Replicas)
	case o.ReconnectWait < 0:
		return fmt.Errorf("warm/natskv: Options.ReconnectWait %v is negative", o.ReconnectWait)
	}
	return nil
}

// bucket is one KV bucket and the stream under it (for purges by subject).
type bucket struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
	name   string
}

type buckets struct{ runs, steps, events, progress, presence, session bucket }

// Store is the NATS JetStream KV warm store. Safe for concurrent use.
type Store struct {
	o    Options
	addr string // for error messages
	nc   *nats.Conn
	js   jetstream.JetStream
	now  func() time.Time

	onClose func() // stops an embedded server; nil otherwise

	stale atomic.Bool // a call found a bucket missing: create them again

	mu     sync.Mutex
	b      *buckets // nil until created (and again after the server lost them)
	closed bool
}

var _ warm.Store = (*Store)(nil)

// Open connects to the NATS server at rawURL ("nats://HOST:PORT", or a
// comma-separated list of servers of one cluster). It does not wait for
// the server: an unreachable server is not an error here (the warm tier is
// optional), the client keeps reconnecting, and calls fail with
// warm.ErrUnavailable until it answers; call Ping to check. Errors: a bad
// URL or invalid options.
func Open(ctx context.Context, rawURL string, o Options) (*Store, error) {
	o = o.WithDefaults()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if err := checkURL(rawURL); err != nil {
		return nil, err
	}
	return open(ctx, rawURL, Redacted(rawURL), o)
}

// Redacted is rawURL (one server's URL, or a comma-separated list) without
// the user information of any server — a user and password
// (nats://USER:PASSWORD@HOST:PORT) or a token (nats://TOKEN@HOST:PORT) —
// so that it can be shown in messages and logs: nats://HOST:PORT.
func Redacted(rawURL string) string {
	parts := strings.Split(rawURL, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		if s := strings.Index(p, "://"); s >= 0 {
			if at := strings.LastIndex(p, "@"); at > s {
				p = p[:s+3] + p[at+1:]
			}
		}
		parts[i] = p
	}
	return strings.Join(parts, ",")
}

func checkURL(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("warm/natskv: NATS URL %q: %w", rawURL, err)
	}
	switch u.Scheme {
	case "nats", "tls":
	default:
		return fmt.Errorf("warm/natskv: NATS URL %q: scheme must be nats:// or tls://", rawURL)
	}
	if u.Host == "" {
		return fmt.Errorf("warm/natskv: NATS URL %q has no host", rawURL)
	}
	return nil
}

func open(ctx context.Context, servers, addr string, o Options, extra ...nats.Option) (*Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	opts := append([]nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(o.ReconnectWait),
		nats.ReconnectJitter(o.ReconnectWait/4, o.ReconnectWait/4),
		nats.RetryOnFailedConnect(true),
		// Nothing is buffered while disconnected: a call fails at once
		// and the caller (the drainer) keeps its row.
		nats.ReconnectBufSize(-1),
		nats.Timeout(o.OpTimeout),
		nats.NoCallbacksAfterClientClose(),
	}, extra...)
	nc, err := nats.Connect(servers, opts...)
	if err != nil {
		return nil, fmt.Errorf("warm/natskv: connect to %s: %w", addr, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("warm/natskv: JetStream context on %s: %w", addr, err)
	}
	return &Store{o: o, addr: addr, nc: nc, js: js, now: time.Now}, nil
}

var errClosed = errors.New("warm/natskv: store is closed")

// call prepares one operation: its bounded context and the buckets.
func (s *Store) call(ctx context.Context, op string) (context.Context, context.CancelFunc, *buckets, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.OpTimeout)
	b, err := s.buckets(ctx, op)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, b, nil
}

func (s *Store) buckets(ctx context.Context, op string) (*buckets, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, s.wrap(op, "", err)
	}
	if !s.nc.IsConnected() {
		return nil, fmt.Errorf("warm/natskv: %s: NATS at %s is not connected (%s): %w", op, s.addr, s.nc.Status(), warm.ErrUnavailable)
	}
	if s.stale.Swap(false) {
		s.b = nil
	}
	if s.b != nil {
		return s.b, nil
	}
	storage := jetstream.FileStorage
	if s.o.MemoryStorage {
		storage = jetstream.MemoryStorage
	}
	mk := func(suffix, desc string, ttl time.Duration) (bucket, error) {
		name := s.o.Prefix + "_" + suffix
		kv, err := s.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      name,
			Description: "starflow warm tier: " + desc,
			History:     1,
			TTL:         ttl,
			Storage:     storage,
			Replicas:    s.o.Replicas,
		})
		if err != nil {
			return bucket{}, s.wrap(op, "create bucket "+name, err)
		}
		st, err := s.js.Stream(ctx, "KV_"+name)
		if err != nil {
			return bucket{}, s.wrap(op, "stream of bucket "+name, err)
		}
		return bucket{kv: kv, stream: st, name: name}, nil
	}
	var b buckets
	var err error
	if b.runs, err = mk("runs", "run entries", 0); err != nil {
		return nil, err
	}
	if b.steps, err = mk("steps", "step instances", 0); err != nil {
		return nil, err
	}
	if b.events, err = mk("events", "recent events per run", 0); err != nil {
		return nil, err
	}
	if b.progress, err = mk("progress", "step progress", s.o.ProgressMaxAge); err != nil {
		return nil, err
	}
	if b.presence, err = mk("presence", "runner presence", s.o.PresenceMaxAge); err != nil {
		return nil, err
	}
	if b.session, err = mk("session", "session variables", 0); err != nil {
		return nil, err
	}
	s.b = &b
	return s.b, nil
}

// wrap turns a client error into the store's: unreachable, timed out or
// answered by no one wraps warm.ErrUnavailable; a missing bucket also makes
// the next call create the buckets again (a server restarted empty).
func (s *Store) wrap(op, what string, err error) error {
	if what != "" {
		op += " " + what
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		s.forgetBuckets()
		return fmt.Errorf("warm/natskv: %s at %s: bucket missing, will be created again: %w: %w", op, s.addr, warm.ErrUnavailable, err)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrNoServers), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, nats.ErrConnectionDraining):
		return fmt.Errorf("warm/natskv: %s at %s (status %s): %w: %w", op, s.addr, s.nc.Status(), warm.ErrUnavailable, err)
	}
	return fmt.Errorf("warm/natskv: %s at %s: %w", op, s.addr, err)
}

// wrapPut is wrap for a write of size bytes under key: a payload over the
// server's max_payload (nats.ErrMaxPayload, refused by the client before
// sending) or over the stream's maximum message size (JetStream error
// 10054) wraps warm.ErrInvalid and names the key and the size, since
// retrying the same entry can never succeed; anything else is wrap's.
func (s *Store) wrapPut(op, what, key string, size int, err error) error {
	var apiErr *jetstream.APIError
	if errors.Is(err, nats.ErrMaxPayload) ||
		(errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum) {
		return fmt.Errorf("warm/natskv: %s %s: %w: key %s: entry of %d bytes exceeds the NATS server's max_payload of %d bytes: %w",
			op, what, warm.ErrInvalid, key, size, s.nc.MaxPayload(), err)
	}
	return s.wrap(op, what, err)
}

// forgetBuckets makes the next call create the buckets again. It may run
// with s.mu held (from buckets), hence the flag.
func (s *Store) forgetBuckets() { s.stale.Store(true) }

func isConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

// purge removes every message of subjects matching keyFilter from b's
// stream (no delete markers are left behind).
func (s *Store) purge(ctx context.Context, b bucket, keyFilter string) error {
	return b.stream.Purge(ctx, jetstream.WithPurgeSubject("$KV."+b.name+"."+keyFilter))
}

// PutRun implements warm.Store with a revision compare-and-set loop (see
// the package doc).
func (s *Store) PutRun(ctx context.Context, e *warm.RunEntry, force bool) (bool, error) {
	if err := warm.ValidateRun(e); err != nil {
		return false, err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return false, fmt.Errorf("warm/natskv: PutRun %s: encode: %w", e.RunID, err)
	}
	ctx, cancel, b, err := s.call(ctx, "PutRun "+e.RunID)
	if err != nil {
		return false, err
	}
	defer cancel()
	key := runKey(e.RunID)
	for range maxCASAttempts {
		cur, err := b.runs.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			_, err = b.runs.kv.Create(ctx, key, data)
		case err != nil:
			return false, s.wrap("PutRun", e.RunID, err)
		default:
			var old struct {
				Version int64 `json:"version"`
			}
			// An entry that does not decode is overwritten: the warm tier
			// is a projection, the next write repairs it.
			if !force && json.Unmarshal(cur.Value(), &old) == nil && old.Version >= e.Version {
				return false, nil
			}
			_, err = b.runs.kv.Update(ctx, key, data, cur.Revision())
		}
		if err == nil {
			return true, nil
		}
		if !isConflict(err) {
			return false, s.wrapPut("PutRun", e.RunID, key, len(data), err)
		}
	}
	return false, fmt.Errorf("warm/natskv: PutRun %s: %d revision conflicts in a row", e.RunID, maxCASAttempts)
}

// GetRun implements warm.Store.
func (s *Store) GetRun(ctx context.Context, runID string) (*warm.RunEntry, error) {
	ctx, cancel, b, err := s.call(ctx, "GetRun "+runID)
	if err != nil {
		return nil, err
	}
	defer cancel()
	ent, err := b.runs.kv.Get(ctx, runKey(runID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, warm.ErrNotFound
	}
	if err != nil {
		return nil, s.wrap("GetRun", runID, err)
	}
	var e warm.RunEntry
	if err := json.Unmarshal(ent.Value(), &e); err != nil {
		return nil, fmt.Errorf("warm/natskv: GetRun %s: decode entry: %w", runID, err)
	}
	return &e, nil
}

// DeleteRun implements warm.Store: purges the run's entry and every step
// and progress entry under it.
func (s *Store) DeleteRun(ctx context.Context, runID string) error {
	ctx, cancel, b, err := s.call(ctx, "DeleteRun "+runID)
	if err != nil {
		return err
	}
	defer cancel()
	if err := s.purge(ctx, b.steps, runFilter(runID)); err != nil {
		return s.wrap("DeleteRun", runID+": steps", err)
	}
	if err := s.purge(ctx, b.progress, runFilter(runID)); err != nil {
		return s.wrap("DeleteRun", runID+": progress", err)
	}
	if err := s.purge(ctx, b.events, runKey(runID)); err != nil {
		return s.wrap("DeleteRun", runID+": events", err)
	}
	if err := s.purge(ctx, b.runs, runKey(runID)); err != nil {
		return s.wrap("DeleteRun", runID, err)
	}
	return nil
}

// ListRunIDs implements warm.Store.
func (s *Store) ListRunIDs(ctx context.Context) ([]string, error) {
	ctx, cancel, b, err := s.call(ctx, "ListRunIDs")
	if err != nil {
		return nil, err
	}
	defer cancel()
	kl, err := b.runs.kv.ListKeys(ctx)
	if err != nil {
		return nil, s.wrap("ListRunIDs", "", err)
	}
	defer func() { _ = kl.Stop() }()
	seen := map[string]bool{}
	ids := []string{}
	for k := range kl.Keys() {
		if seen[k] {
			continue
		}
		seen[k] = true
		id, err := untoken(k)
		if err != nil {
			return nil, fmt.Errorf("warm/natskv: ListRunIDs: foreign key in bucket %s: %w", b.runs.name, err)
		}
		ids = append(ids, id)
	}
	if err := ctx.Err(); err != nil {
		return nil, s.wrap("ListRunIDs", "(listing cut short)", err)
	}
	return ids, nil
}

// values reads the current value of every key matching filter ("" = all).
func (s *Store) values(ctx context.Context, b bucket, filter string) ([][]byte, error) {
	var (
		w   jetstream.KeyWatcher
		err error
	)
	if filter == "" {
		w, err = b.kv.WatchAll(ctx, jetstream.IgnoreDeletes())
	} else {
		w, err = b.kv.Watch(ctx, filter, jetstream.IgnoreDeletes())
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = w.Stop() }()
	latest := map[string][]byte{}
	for {
		select {
		case ent, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("watch of %s ended early: %w", b.name, ctx.Err())
			}
			if ent == nil { // every current value delivered
				out := make([][]byte, 0, len(latest))
				for _, v := range latest {
					out = append(out, v)
				}
				return out, nil
			}
			latest[ent.Key()] = ent.Value()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// PutStep implements warm.Store.
func (s *Store) PutStep(ctx context.Context, st *warm.StepEntry) error {
	if err := warm.ValidateStep(st); err != nil {
		return err
	}
	data, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("warm/natskv: PutStep %s/%s: encode: %w", st.RunID, st.StepID, err)
	}
	ctx, cancel, b, err := s.call(ctx, "PutStep")
	if err != nil {
		return err
	}
	defer cancel()
	k := stepKey(st.RunID, st.Attempt, st.ScopePath, st.StepID)
	if _, err := b.steps.kv.Put(ctx, k, data); err != nil {
		return s.wrapPut("PutStep", st.RunID+" "+st.ScopePath+" "+st.StepID, k, len(data), err)
	}
	return nil
}

// ListSteps implements warm.Store.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]*warm.StepEntry, error) {
	ctx, cancel, b, err := s.call(ctx, "ListSteps "+runID)
	if err != nil {
		return nil, err
	}
	defer cancel()
	vals, err := s.values(ctx, b.steps, runFilter(runID))
	if err != nil {
		return nil, s.wrap("ListSteps", runID, err)
	}
	out := make([]*warm.StepEntry, 0, len(vals))
	for _, v := range vals {
		var st warm.StepEntry
		if err := json.Unmarshal(v, &st); err != nil {
			return nil, fmt.Errorf("warm/natskv: ListSteps %s: decode entry: %w", runID, err)
		}
		out = append(out, &st)
	}
	return out, nil
}

// eventsMaxBytesDefault bounds one run's encoded feed when the server's
// max_payload is unknown.
const eventsMaxBytesDefault = 512 << 10

// eventsMaxBytes is the size bound of one run's encoded feed: the
// server's max_payload less room for the message headers.
func (s *Store) eventsMaxBytes() int {
	if mp := s.nc.MaxPayload(); mp > 8<<10 {
		return int(mp) - 4<<10
	}
	return eventsMaxBytesDefault
}

// encodeFeed encodes a feed within maxBytes: the oldest events are dropped
// until it fits, and a lone event that still does not fit keeps its
// fields but not its payload (PayloadOmitted).
func encodeFeed(feed []*warm.EventEntry, maxBytes int) ([]byte, error) {
	for {
		data, err := json.Marshal(feed)
		if err != nil || len(data) <= maxBytes {
			return data, err
		}
		if len(feed) > 1 {
			// Drop about as many oldest events as the excess needs.
			drop := max(1, len(feed)*(len(data)-maxBytes)/len(data))
			feed = feed[min(drop, len(feed)-1):]
			continue
		}
		if feed[0].PayloadOmitted {
			return nil, fmt.Errorf("event %d is %d bytes without its payload (bound %d)", feed[0].ID, len(data), maxBytes)
		}
		c := *feed[0]
		c.Payload, c.PayloadOmitted = nil, true
		feed = []*warm.EventEntry{&c}
	}
}

// AppendEvents implements warm.Store: the run's feed is one key of the
// events bucket holding the JSON array of its newest events, updated by a
// revision compare-and-set (read, merge by id, write at the revision
// read; on a conflict read again), so concurrent drainers lose nothing.
// The encoded feed is also bounded by the server's max_payload (oldest
// events dropped first).
func (s *Store) AppendEvents(ctx context.Context, runID string, evs []*warm.EventEntry, keep int) error {
	if err := warm.ValidateEvents(runID, evs); err != nil {
		return err
	}
	if len(evs) == 0 {
		return nil
	}
	ctx, cancel, b, err := s.call(ctx, "AppendEvents "+runID)
	if err != nil {
		return err
	}
	defer cancel()
	key := runKey(runID)
	for range maxCASAttempts {
		var feed []*warm.EventEntry
		var rev uint64
		cur, err := b.events.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			return s.wrap("AppendEvents", runID, err)
		default:
			rev = cur.Revision()
			// A feed that does not decode is replaced: the warm tier is a
			// projection.
			if json.Unmarshal(cur.Value(), &feed) != nil {
				feed = nil
			}
		}
		merged, changed := warm.MergeEvents(feed, evs, keep)
		if !changed && rev != 0 {
			return nil
		}
		data, err := encodeFeed(merged, s.eventsMaxBytes())
		if err != nil {
			return fmt.Errorf("warm/natskv: AppendEvents %s: %w: %w", runID, warm.ErrInvalid, err)
		}
		if rev == 0 {
			_, err = b.events.kv.Create(ctx, key, data)
		} else {
			_, err = b.events.kv.Update(ctx, key, data, rev)
		}
		if err == nil {
			return nil
		}
		if !isConflict(err) {
			return s.wrap("AppendEvents", runID, err)
		}
	}
	return fmt.Errorf("warm/natskv: AppendEvents %s: %d revision conflicts in a row", runID, maxCASAttempts)
}

// ListEvents implements warm.Store: one read of the run's feed key.
func (s *Store) ListEvents(ctx context.Context, runID string, afterID int64) ([]*warm.EventEntry, error) {
	ctx, cancel, b, err := s.call(ctx, "ListEvents "+runID)
	if err != nil {
		return nil, err
	}
	defer cancel()
	ent, err := b.events.kv.Get(ctx, runKey(runID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return []*warm.EventEntry{}, nil
	}
	if err != nil {
		return nil, s.wrap("ListEvents", runID, err)
	}
	var feed []*warm.EventEntry
	if err := json.Unmarshal(ent.Value(), &feed); err != nil {
		return nil, fmt.Errorf("warm/natskv: ListEvents %s: decode feed: %w", runID, err)
	}
	return warm.EventsAfter(feed, afterID), nil
}

// PutSessionVar implements warm.Store; a nil value purges the key.
func (s *Store) PutSessionVar(ctx context.Context, workspace, session, key string, value json.RawMessage) error {
	if err := warm.ValidateSessionVar(workspace, session, key); err != nil {
		return err
	}
	what := workspace + "/" + session + "/" + key
	ctx, cancel, b, err := s.call(ctx, "PutSessionVar "+what)
	if err != nil {
		return err
	}
	defer cancel()
	k := sessionKey(workspace, session, key)
	if value == nil {
		err = s.purge(ctx, b.session, k)
	} else {
		_, err = b.session.kv.Put(ctx, k, value)
	}
	if err != nil {
		return s.wrapPut("PutSessionVar", what, k, len(value), err)
	}
	return nil
}

// GetSessionVar implements warm.Store.
func (s *Store) GetSessionVar(ctx context.Context, workspace, session, key string) (json.RawMessage, error) {
	what := workspace + "/" + session + "/" + key
	ctx, cancel, b, err := s.call(ctx, "GetSessionVar "+what)
	if err != nil {
		return nil, err
	}
	defer cancel()
	ent, err := b.session.kv.Get(ctx, sessionKey(workspace, session, key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, warm.ErrNotFound
	}
	if err != nil {
		return nil, s.wrap("GetSessionVar", what, err)
	}
	return json.RawMessage(ent.Value()), nil
}

// PutProgress implements warm.Store.
func (s *Store) PutProgress(ctx context.Context, p *warm.Progress) error {
	if err := warm.ValidateProgress(p); err != nil {
		return err
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("warm/natskv: PutProgress %s/%s: encode: %w", p.RunID, p.StepID, err)
	}
	ctx, cancel, b, err := s.call(ctx, "PutProgress")
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := b.progress.kv.Put(ctx, progressKey(p.RunID, p.ScopePath, p.StepID), data); err != nil {
		return s.wrap("PutProgress", p.RunID+" "+p.ScopePath+" "+p.StepID, err)
	}
	return nil
}

// ListProgress implements warm.Store.
func (s *Store) ListProgress(ctx context.Context, runID string) ([]*warm.Progress, error) {
	ctx, cancel, b, err := s.call(ctx, "ListProgress "+runID)
	if err != nil {
		return nil, err
	}
	defer cancel()
	vals, err := s.values(ctx, b.progress, runFilter(runID))
	if err != nil {
		return nil, s.wrap("ListProgress", runID, err)
	}
	out := make([]*warm.Progress, 0, len(vals))
	for _, v := range vals {
		var p warm.Progress
		if err := json.Unmarshal(v, &p); err != nil {
			return nil, fmt.Errorf("warm/natskv: ListProgress %s: decode entry: %w", runID, err)
		}
		out = append(out, &p)
	}
	return out, nil
}

// presenceValue is a presence entry with its own deadline (see the package
// doc on presence expiry).
type presenceValue struct {
	warm.Presence
	ExpiresAt time.Time `json:"expires_at"`
}

// PutPresence implements warm.Store. ttl must not exceed
// Options.PresenceMaxAge (warm.ErrInvalid otherwise).
func (s *Store) PutPresence(ctx context.Context, p *warm.Presence, ttl time.Duration) error {
	if err := warm.ValidatePresence(p, ttl); err != nil {
		return err
	}
	if ttl > s.o.PresenceMaxAge {
		return fmt.Errorf("%w: PutPresence: ttl %v of runner %s exceeds the presence bucket's MaxAge %v (Options.PresenceMaxAge)", warm.ErrInvalid, ttl, p.RunnerID, s.o.PresenceMaxAge)
	}
	data, err := json.Marshal(presenceValue{Presence: *p, ExpiresAt: s.now().Add(ttl)})
	if err != nil {
		return fmt.Errorf("warm/natskv: PutPresence %s: encode: %w", p.RunnerID, err)
	}
	ctx, cancel, b, err := s.call(ctx, "PutPresence "+p.RunnerID)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := b.presence.kv.Put(ctx, presenceKey(p.RunnerID), data); err != nil {
		return s.wrap("PutPresence", p.RunnerID, err)
	}
	return nil
}

// ListPresence implements warm.Store: entries past their deadline are not
// listed.
func (s *Store) ListPresence(ctx context.Context) ([]*warm.Presence, error) {
	ctx, cancel, b, err := s.call(ctx, "ListPresence")
	if err != nil {
		return nil, err
	}
	defer cancel()
	vals, err := s.values(ctx, b.presence, "")
	if err != nil {
		return nil, s.wrap("ListPresence", "", err)
	}
	now := s.now()
	out := make([]*warm.Presence, 0, len(vals))
	for _, v := range vals {
		var pv presenceValue
		if err := json.Unmarshal(v, &pv); err != nil {
			return nil, fmt.Errorf("warm/natskv: ListPresence: decode entry: %w", err)
		}
		if !now.Before(pv.ExpiresAt) {
			continue
		}
		p := pv.Presence
		out = append(out, &p)
	}
	return out, nil
}

// Ping implements warm.Store: the connection is up, the buckets exist and
// JetStream answers.
func (s *Store) Ping(ctx context.Context) error {
	ctx, cancel, b, err := s.call(ctx, "Ping")
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := b.runs.kv.Status(ctx); err != nil {
		return s.wrap("Ping", "", err)
	}
	return nil
}

// Close implements warm.Store: closes the connection and stops the
// embedded server, if any. Closing twice is safe.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.nc.Close()
	if s.onClose != nil {
		s.onClose()
	}
	return nil
}
