// Package memory is the in-process warm store (SPEC §8): maps behind one
// mutex, for a single node. Entries live as long as the process, or until
// DeleteRun (the mirror's drainer calls it for the runs retention removes
// from the cold store); presence expires by its deadline, checked when
// read.
//
// Import rule: the standard library and package warm only.
package memory

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/starflow/starflow/warm"
)

type stepKey struct {
	attempt           int
	scopePath, stepID string
}

type progressKey struct{ scopePath, stepID string }

type sessionKey struct{ workspace, session, key string }

type presenceEntry struct {
	p        warm.Presence
	deadline time.Time
}

// Store is the in-process warm store. The zero value is not usable; call New.
type Store struct {
	now func() time.Time

	mu       sync.Mutex
	closed   bool
	runs     map[string]*warm.RunEntry
	steps    map[string]map[stepKey]*warm.StepEntry
	events   map[string][]*warm.EventEntry // per run, sorted by id, bounded
	progress map[string]map[progressKey]*warm.Progress
	vars     map[sessionKey]json.RawMessage
	presence map[string]presenceEntry
}

var _ warm.Store = (*Store)(nil)

// New returns an empty in-process store using the wall clock.
func New() *Store { return NewWithClock(time.Now) }

// NewWithClock returns an empty store whose presence expiry reads now
// (tests drive time with it).
func NewWithClock(now func() time.Time) *Store {
	return &Store{
		now:      now,
		runs:     map[string]*warm.RunEntry{},
		steps:    map[string]map[stepKey]*warm.StepEntry{},
		events:   map[string][]*warm.EventEntry{},
		progress: map[string]map[progressKey]*warm.Progress{},
		vars:     map[sessionKey]json.RawMessage{},
		presence: map[string]presenceEntry{},
	}
}

// errClosed is returned by every method after Close.
var errClosed = fmt.Errorf("warm/memory: store is closed")

func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	return nil
}

// PutRun implements warm.Store.
func (s *Store) PutRun(ctx context.Context, e *warm.RunEntry, force bool) (bool, error) {
	if err := warm.ValidateRun(e); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	if old, ok := s.runs[e.RunID]; ok && !force && old.Version >= e.Version {
		return false, nil
	}
	s.runs[e.RunID] = cloneRun(e)
	return true, nil
}

// GetRun implements warm.Store.
func (s *Store) GetRun(ctx context.Context, runID string) (*warm.RunEntry, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	e, ok := s.runs[runID]
	if !ok {
		return nil, warm.ErrNotFound
	}
	return cloneRun(e), nil
}

// DeleteRun implements warm.Store.
func (s *Store) DeleteRun(ctx context.Context, runID string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	delete(s.runs, runID)
	delete(s.steps, runID)
	delete(s.events, runID)
	delete(s.progress, runID)
	return nil
}

// ListRunIDs implements warm.Store.
func (s *Store) ListRunIDs(ctx context.Context) ([]string, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.runs))
	for id := range s.runs {
		ids = append(ids, id)
	}
	return ids, nil
}

// PutStep implements warm.Store.
func (s *Store) PutStep(ctx context.Context, st *warm.StepEntry) error {
	if err := warm.ValidateStep(st); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	m := s.steps[st.RunID]
	if m == nil {
		m = map[stepKey]*warm.StepEntry{}
		s.steps[st.RunID] = m
	}
	c := *st
	m[stepKey{st.Attempt, st.ScopePath, st.StepID}] = &c
	return nil
}

// ListSteps implements warm.Store.
func (s *Store) ListSteps(ctx context.Context, runID string) ([]*warm.StepEntry, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]*warm.StepEntry, 0, len(s.steps[runID]))
	for _, st := range s.steps[runID] {
		c := *st
		out = append(out, &c)
	}
	return out, nil
}

// AppendEvents implements warm.Store.
func (s *Store) AppendEvents(ctx context.Context, runID string, evs []*warm.EventEntry, keep int) error {
	if err := warm.ValidateEvents(runID, evs); err != nil {
		return err
	}
	add := make([]*warm.EventEntry, len(evs))
	for i, e := range evs {
		add[i] = cloneEvent(e)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if feed, changed := warm.MergeEvents(s.events[runID], add, keep); changed {
		s.events[runID] = feed
	}
	return nil
}

// ListEvents implements warm.Store.
func (s *Store) ListEvents(ctx context.Context, runID string, afterID int64) ([]*warm.EventEntry, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	after := warm.EventsAfter(s.events[runID], afterID)
	out := make([]*warm.EventEntry, len(after))
	for i, e := range after {
		out[i] = cloneEvent(e)
	}
	return out, nil
}

// PutSessionVar implements warm.Store.
func (s *Store) PutSessionVar(ctx context.Context, workspace, session, key string, value json.RawMessage) error {
	if err := warm.ValidateSessionVar(workspace, session, key); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	k := sessionKey{workspace, session, key}
	if value == nil {
		delete(s.vars, k)
		return nil
	}
	s.vars[k] = slices.Clone(value)
	return nil
}

// GetSessionVar implements warm.Store.
func (s *Store) GetSessionVar(ctx context.Context, workspace, session, key string) (json.RawMessage, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	v, ok := s.vars[sessionKey{workspace, session, key}]
	if !ok {
		return nil, warm.ErrNotFound
	}
	return slices.Clone(v), nil
}

// PutProgress implements warm.Store.
func (s *Store) PutProgress(ctx context.Context, p *warm.Progress) error {
	if err := warm.ValidateProgress(p); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	m := s.progress[p.RunID]
	if m == nil {
		m = map[progressKey]*warm.Progress{}
		s.progress[p.RunID] = m
	}
	c := *p
	m[progressKey{p.ScopePath, p.StepID}] = &c
	return nil
}

// ListProgress implements warm.Store.
func (s *Store) ListProgress(ctx context.Context, runID string) ([]*warm.Progress, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]*warm.Progress, 0, len(s.progress[runID]))
	for _, p := range s.progress[runID] {
		c := *p
		out = append(out, &c)
	}
	return out, nil
}

// PutPresence implements warm.Store.
func (s *Store) PutPresence(ctx context.Context, p *warm.Presence, ttl time.Duration) error {
	if err := warm.ValidatePresence(p, ttl); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	c := *p
	c.Pools = slices.Clone(p.Pools)
	s.presence[p.RunnerID] = presenceEntry{p: c, deadline: s.now().Add(ttl)}
	return nil
}

// ListPresence implements warm.Store; expired entries are dropped.
func (s *Store) ListPresence(ctx context.Context) ([]*warm.Presence, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.now()
	out := make([]*warm.Presence, 0, len(s.presence))
	for id, pe := range s.presence {
		if !now.Before(pe.deadline) {
			delete(s.presence, id)
			continue
		}
		c := pe.p
		c.Pools = slices.Clone(pe.p.Pools)
		out = append(out, &c)
	}
	return out, nil
}

// Ping implements warm.Store: nil until Close.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	s.mu.Unlock()
	return nil
}

// Close implements warm.Store; later calls return an error. Closing twice
// is safe.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func cloneRun(e *warm.RunEntry) *warm.RunEntry {
	c := *e
	c.CurrentSteps = slices.Clone(e.CurrentSteps)
	c.Output = slices.Clone(e.Output)
	return &c
}

func cloneEvent(e *warm.EventEntry) *warm.EventEntry {
	c := *e
	c.Payload = slices.Clone(e.Payload)
	return &c
}
