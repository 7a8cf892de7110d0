package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
)

// Live streams (Server-Sent Events).
const (
	// livePoll is how often a stream looks for changes.
	livePoll = 250 * time.Millisecond
	// liveRunsPoll is how often the all-runs stream reads the warm tier.
	liveRunsPoll = time.Second
	// liveKeepAlive is how often an idle stream sends a comment, so
	// proxies and the write deadline keep it open.
	liveKeepAlive = 10 * time.Second
	// liveWriteTimeout bounds one write of a stream.
	liveWriteTimeout = 30 * time.Second
	// liveRecheck is how often a stream checks that its key still holds
	// (a revoked key's streams end within it).
	liveRecheck = 5 * time.Second
	// liveMaxAge ends a stream after this long; a client reconnects with
	// Last-Event-ID and misses nothing.
	liveMaxAge = time.Hour
	// liveStreamsPerCaller and liveStreamsMax bound the open streams of
	// one key (or client address) and of the server.
	liveStreamsPerCaller = 16
	liveStreamsMax       = 1000
)

// streams counts the open live streams per caller, to bound them.
type streams struct {
	mu    sync.Mutex
	open  map[string]int
	total int
}

// take reserves a stream for caller; false when over a bound.
func (st *streams) take(caller string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.open == nil {
		st.open = map[string]int{}
	}
	if st.open[caller] >= liveStreamsPerCaller || st.total >= liveStreamsMax {
		return false
	}
	st.open[caller]++
	st.total++
	return true
}

func (st *streams) release(caller string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.open[caller]--; st.open[caller] <= 0 {
		delete(st.open, caller)
	}
	st.total--
}

// openStream reserves a stream for the request's caller, or answers 429.
func (s *apiServer) openStream(ctx context.Context) (caller string, err error) {
	p := principalOf(ctx)
	caller = "open"
	if p.keyID != "" {
		caller = p.keyID
	}
	if !s.live.take(caller) {
		return "", huma.ErrorWithHeaders(huma.Error429TooManyRequests(fmt.Sprintf(
			"too many live streams open: at most %d per key and %d in all; close one", liveStreamsPerCaller, liveStreamsMax)),
			http.Header{"Retry-After": []string{"10"}})
	}
	return caller, nil
}

type liveRunInput struct {
	RunIDParam
	LastEventID string `header:"Last-Event-ID" maxLength:"20" doc:"Resume after this event id (sent by EventSource on reconnect)."`
	After       int64  `query:"after" minimum:"0" doc:"Start after this event id (when no Last-Event-ID is sent)."`
}

type liveRunsInput struct {
	LastEventID string `header:"Last-Event-ID" maxLength:"20" doc:"Resume after this position (the id of the last message seen)."`
}

// sseResponse documents a text/event-stream answer.
func sseResponse(o huma.Operation, what string) huma.Operation {
	o.Responses = map[string]*huma.Response{"200": {
		Description: what,
		Content:     map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Type: huma.TypeString}}},
	}}
	return o
}

func (s *apiServer) registerLive() {
	huma.Register(s.api, sseResponse(withErrors(op("stream-live-run", http.MethodGet, "/api/live/runs/{id}", starflowtype.RoleViewer,
		"Stream a run's changes as Server-Sent Events until it settles", "live"), http.StatusNotFound, http.StatusServiceUnavailable),
		"Messages `event` (data: LiveEvent, id: the event's id), `run` (data: LiveRun, when its status, phase or version changes) and `progress` (data: LiveProgress, a step's newer progress report; warm tier only); the stream ends after the run settles. Read from the warm tier, or the cold store when there is none."),
		func(ctx context.Context, in *liveRunInput) (*huma.StreamResponse, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			after := in.After
			if in.LastEventID != "" {
				n, err := strconv.ParseInt(in.LastEventID, 10, 64)
				if err != nil || n < 0 {
					return nil, huma.Error400BadRequest(fmt.Sprintf("Last-Event-ID %q: want an event id", in.LastEventID))
				}
				after = n
			}
			feed := s.feedOf(ctx, r)
			caller, err := s.openStream(ctx)
			if err != nil {
				return nil, err
			}
			return &huma.StreamResponse{Body: func(hctx huma.Context) {
				defer s.live.release(caller)
				s.streamRun(hctx, feed, after)
			}}, nil
		})
	huma.Register(s.api, sseResponse(withErrors(op("stream-live-runs", http.MethodGet, "/api/live/runs", starflowtype.RoleViewer,
		"Stream every run's changes as Server-Sent Events (needs the warm tier)", "live"), http.StatusServiceUnavailable),
		"Messages `run` (data: LiveRun), one per change, in update order; the id is the update time in microseconds since the epoch, so Last-Event-ID resumes after it."),
		func(ctx context.Context, in *liveRunsInput) (*huma.StreamResponse, error) {
			var since int64
			if in.LastEventID != "" {
				n, err := strconv.ParseInt(in.LastEventID, 10, 64)
				if err != nil || n < 0 {
					return nil, huma.Error400BadRequest(fmt.Sprintf("Last-Event-ID %q: want the id of a message of this stream", in.LastEventID))
				}
				since = n
			}
			rctx, cancel := s.ctx(ctx)
			_, err := s.engine.LiveRunners(rctx) // one cheap read: is there a warm tier, and does it answer?
			cancel()
			if err != nil {
				return nil, liveUnavailable(err)
			}
			p := principalOf(ctx)
			caller, err := s.openStream(ctx)
			if err != nil {
				return nil, err
			}
			return &huma.StreamResponse{Body: func(hctx huma.Context) {
				defer s.live.release(caller)
				s.streamRuns(hctx, p, since)
			}}, nil
		})
}

// liveUnavailable is the 503 of a stream that needs the warm tier.
func liveUnavailable(err error) error {
	if errors.Is(err, starflow.ErrNoWarm) {
		return huma.Error503ServiceUnavailable("this server runs without a warm tier (--warm): the live runs stream needs one; GET /api/runs lists runs")
	}
	return huma.Error503ServiceUnavailable("the warm tier did not answer; retry")
}

// runFeed is where a run's stream reads: the warm tier or the cold store.
type runFeed struct {
	s     *apiServer
	runID string
	warm  bool
}

// feedOf picks the warm tier when it holds (or will hold) the run, the
// cold store otherwise (no warm tier, warm down, or a run that settled
// and left warm).
func (s *apiServer) feedOf(ctx context.Context, r *starflowtype.Run) *runFeed {
	f := &runFeed{s: s, runID: r.ID}
	rctx, cancel := s.ctx(ctx)
	defer cancel()
	_, err := s.engine.LiveRun(rctx, r.ID)
	f.warm = err == nil || (errors.Is(err, starflowtype.ErrNotFound) && !starflow.Settled(r))
	return f
}

// progress is the run's progress reports newer than those sent (warm
// only; none without a warm tier or when it does not answer), and marks
// them sent in reported.
func (f *runFeed) progress(ctx context.Context, reported map[string]time.Time) []api.LiveProgress {
	if !f.warm {
		return nil
	}
	rctx, cancel := f.s.ctx(ctx)
	defer cancel()
	prs, err := f.s.engine.LiveProgress(rctx, f.runID)
	if err != nil {
		return nil
	}
	var out []api.LiveProgress
	for _, p := range prs {
		k := p.ScopePath + "/" + p.StepID
		if !p.At.After(reported[k]) {
			continue
		}
		reported[k] = p.At
		out = append(out, api.LiveProgress{RunID: p.RunID, ScopePath: p.ScopePath, StepID: p.StepID, Fraction: p.Fraction, Message: p.Message, At: p.At})
	}
	return out
}

func (f *runFeed) events(ctx context.Context, after int64) ([]api.LiveEvent, error) {
	var out []api.LiveEvent
	if f.warm {
		evs, err := f.s.engine.LiveEvents(ctx, f.runID, after)
		if err != nil {
			return nil, err
		}
		for _, e := range evs {
			out = append(out, api.LiveEvent{ID: e.ID, RunID: e.RunID, Attempt: e.Attempt, Type: e.EventType, NodeID: e.NodeID,
				ScopePath: e.ScopePath, Payload: e.Payload, CreatedAt: e.CreatedAt})
		}
		return out, nil
	}
	evs, err := f.s.store.ListEvents(ctx, &state.ListEventsParams{RunID: f.runID, AfterID: after, Limit: 1000})
	if err != nil {
		return nil, err
	}
	for _, e := range evs {
		out = append(out, api.LiveEvent{ID: e.ID, RunID: e.RunID, Attempt: e.Attempt, Type: string(e.Type), NodeID: e.NodeID,
			ScopePath: e.ScopePath, Payload: e.Payload, CreatedAt: e.CreatedAt})
	}
	return out, nil
}

// state is the run's live state (nil while warm has no entry yet) and
// whether it settled.
func (f *runFeed) state(ctx context.Context) (*api.LiveRun, bool, error) {
	if f.warm {
		e, err := f.s.engine.LiveRun(ctx, f.runID)
		if errors.Is(err, starflowtype.ErrNotFound) {
			return nil, false, nil
		}
		if err != nil {
			return nil, false, err
		}
		run := liveRunOf(e)
		return run, starflow.Settled(&starflowtype.Run{Status: run.Status, ClaimState: starflowtype.ClaimState(e.ClaimState)}), nil
	}
	r, err := f.s.store.GetRun(ctx, &state.GetRunParams{ID: f.runID})
	if err != nil {
		return nil, false, err
	}
	return &api.LiveRun{RunID: r.ID, WorkflowName: r.WorkflowName, Status: r.Status, Phase: r.Phase, Attempt: r.Attempt,
		Error: r.Error, Output: r.Output, UpdatedAt: r.UpdatedAt}, starflow.Settled(r), nil
}

func liveRunOf(e *warm.RunEntry) *api.LiveRun {
	return &api.LiveRun{RunID: e.RunID, WorkflowName: e.WorkflowName, Status: starflowtype.RunStatus(e.Status), Phase: e.Phase,
		Attempt: e.Attempt, Error: e.Error, Output: e.Output, Version: e.Version, UpdatedAt: e.UpdatedAt}
}

// sse writes Server-Sent Events, extending the write deadline per write.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func newSSE(hctx huma.Context) *sse {
	_, w := humago.Unwrap(hctx)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: http.NewResponseController(w)}
	_ = s.flush()
	return s
}

func (s *sse) send(event string, id int64, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return err
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(liveWriteTimeout))
	if _, err := fmt.Fprintf(s.w, "id: %d\nevent: %s\ndata: %s\n\n", id, event, raw); err != nil {
		return err
	}
	return s.flush()
}

func (s *sse) keepAlive() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(liveWriteTimeout))
	if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	return s.flush()
}

func (s *sse) flush() error { return s.rc.Flush() }

// streamRun sends a run's events after `after` and its state changes
// until it settles, the client leaves or the server stops.
func (s *apiServer) streamRun(hctx huma.Context, f *runFeed, after int64) {
	ctx := hctx.Context()
	out := newSSE(hctx)
	var last *api.LiveRun
	start, lastWrite, lastCheck := time.Now(), time.Now(), time.Now()
	settledPasses, absent := 0, 0
	reported := map[string]time.Time{} // scope/step → the time of the last progress report sent
	p := principalOf(ctx)
	for {
		if time.Since(start) > liveMaxAge {
			return
		}
		if time.Since(lastCheck) >= liveRecheck {
			if !s.stillValid(ctx, p) {
				return // the key was revoked: no more events for it
			}
			lastCheck = time.Now()
		}
		rctx, cancel := s.ctx(ctx)
		evs, err := f.events(rctx, after)
		var cur *api.LiveRun
		var settled bool
		if err == nil {
			cur, settled, err = f.state(rctx)
		}
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			s.cfg.Logger.Warn("api: live stream read failed", "run_id", f.runID, "error", err)
		}
		for _, e := range evs {
			if out.send("event", e.ID, e) != nil {
				return
			}
			after, lastWrite = e.ID, time.Now()
		}
		for _, pr := range f.progress(ctx, reported) {
			if out.send("progress", after, pr) != nil {
				return
			}
			lastWrite = time.Now()
		}
		if cur != nil && (last == nil || cur.Status != last.Status || cur.Phase != last.Phase || cur.Version != last.Version || cur.Attempt != last.Attempt) {
			if out.send("run", after, cur) != nil {
				return
			}
			last, lastWrite = cur, time.Now()
		}
		if cur == nil && f.warm {
			// Warm holds no entry: after a while, ask the cold store
			// whether the run settled (its entry may have left warm).
			if absent++; absent%20 == 0 {
				if r, err := s.store.GetRun(ctx, &state.GetRunParams{ID: f.runID}); err == nil && starflow.Settled(r) {
					f.warm = false
				}
			}
		}
		if settled {
			// One more pass picks up events that reached the feed after
			// the run's state did.
			if settledPasses++; settledPasses > 1 {
				return
			}
		}
		if time.Since(lastWrite) >= liveKeepAlive {
			if out.keepAlive() != nil {
				return
			}
			lastWrite = time.Now()
		}
		if !s.sleep(ctx, livePoll) {
			return
		}
	}
}

// streamRuns sends the warm run entries of p's workspace (and env) as
// they change, each once per version, in update order.
func (s *apiServer) streamRuns(hctx huma.Context, p *principal, since int64) {
	ctx := hctx.Context()
	out := newSSE(hctx)
	versions := map[string]int64{}
	envs := map[string]string{} // run id → env, read once when the key is env-limited
	start, lastWrite, lastCheck := time.Now(), time.Now(), time.Now()
	for {
		if time.Since(start) > liveMaxAge {
			return
		}
		if time.Since(lastCheck) >= liveRecheck {
			if !s.stillValid(ctx, p) {
				return
			}
			lastCheck = time.Now()
		}
		rctx, cancel := s.ctx(ctx)
		entries, err := s.engine.LiveRuns(rctx)
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("api: live runs read failed", "error", err)
		}
		if err == nil {
			// Forget runs that left the warm tier: the maps stay as
			// large as the warm tier's listing.
			present := make(map[string]bool, len(entries))
			for _, e := range entries {
				present[e.RunID] = true
			}
			for id := range versions {
				if !present[id] {
					delete(versions, id)
					delete(envs, id)
				}
			}
		}
		slices.SortFunc(entries, func(a, b *warm.RunEntry) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
		for _, e := range entries {
			id := e.UpdatedAt.UnixMicro()
			if e.WorkspaceID != p.workspace || id <= since || versions[e.RunID] == e.Version {
				continue
			}
			if p.env != "" {
				env, ok := envs[e.RunID]
				if !ok {
					r, err := s.store.GetRun(rctx, &state.GetRunParams{WorkspaceID: p.workspace, ID: e.RunID})
					if err != nil {
						continue // asked again next pass
					}
					env = r.Env
					envs[e.RunID] = env
				}
				if env != p.env {
					continue
				}
			}
			versions[e.RunID] = e.Version
			if out.send("run", id, liveRunOf(e)) != nil {
				cancel()
				return
			}
			lastWrite = time.Now()
		}
		cancel()
		if time.Since(lastWrite) >= liveKeepAlive {
			if out.keepAlive() != nil {
				return
			}
			lastWrite = time.Now()
		}
		if !s.sleep(ctx, liveRunsPoll) {
			return
		}
	}
}

// sleep waits d; false when ctx ended or the server is stopping first.
func (s *apiServer) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-s.stopping:
		return false
	case <-t.C:
		return true
	}
}
