package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/step"
	"github.com/starflow/starflow/workflow"
)

// The constructs whose children run concurrently: for_each items and
// parallel lanes. Each child runs in a frame of its own (frames.go) that
// starts from the construct's context as of the construct's start; no
// child sees another's changes. At the join the children's deltas are
// merged in a fixed order — item index, lane name — whatever order they
// finished in, so a resumed run (some children restored from checkpoints,
// others executed) ends with exactly the output of an uninterrupted one.
// Every goroutine a construct starts has ended when it returns, however
// it ends (failure, cancellation, lease loss, shutdown).

// execForEach runs the loop's steps once per element of items, item i in
// scope <id>.item_<i> with the element bound to `as`, up to concurrency
// items at a time, started in item order. The output is the list of the
// items' last outputs, in item order.
//
// More items than Limits.ForEachItems fail the step before any starts
// (permanently: the same items fail the same way). The items run on a
// pool of at most Limits.ForEachInFlight workers, whatever the
// concurrency (a maximum, not a promise): the goroutines and item frames
// alive at once are bounded by the pool, not by the number of items. An
// item's frame lives while the item runs; what outlives it is its output
// (the step's output needs it); its context changes are merged at once (a
// later item's value of a key wins, as a merge in item order would have
// it).
//
// When an item fails, no further item starts; the items in flight run to
// their end (they are not cancelled: what they complete is checkpointed
// and not redone on resume), and the loop fails with the failure of the
// lowest failed item index. Items that never started have no ledger rows.
func (rs *runState) execForEach(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	fe := s.ForEach
	// items is an expression by nature, like when: bare CEL or one ${{ }}.
	tpl, err := f.env.ParseExpr(fe.Items)
	if err != nil {
		return nil, exprError(fmt.Errorf("for_each.items: %w", err))
	}
	v, err := f.env.EvalTemplate(ctx, tpl, f.vals)
	if err != nil {
		return nil, exprError(fmt.Errorf("for_each.items: %w", err))
	}
	items, ok := v.([]any)
	if !ok {
		return nil, exprError(fmt.Errorf("for_each.items must evaluate to a list, got %s", jsonType(v)))
	}
	if err := rs.e.cfg.Limits.CheckForEachItems(s.ID, len(items)); err != nil {
		return nil, typed(starflowtype.ErrorInputInvalid, err)
	}
	// The implicit index is not bound over the item's name or an enclosing
	// loop's (a definition applied before index existed may use "index").
	name, index := fe.ItemName(), fe.IndexName()
	if fe.IndexAs == "" && (index == name || slices.Contains(f.named, index)) {
		index = ""
	}
	names := []string{name}
	if index != "" {
		names = append(names, index)
	}
	named := append(slices.Clone(f.named), name)
	if fe.IndexAs != "" {
		named = append(named, fe.IndexAs)
	}
	env, err := f.env.With(names...)
	if err != nil {
		return nil, step.Permanent(err)
	}
	n := len(items)
	outs := make([]any, n)
	var (
		mu     sync.Mutex
		next   int
		failed bool
		errs   = map[int]error{}
		merged = newOrderedMerge()
	)
	claim := func() int {
		mu.Lock()
		defer mu.Unlock()
		if failed || next >= n || ctx.Err() != nil {
			return -1
		}
		next++
		return next - 1
	}
	finish := func(i int, delta map[string]any, err error) {
		mu.Lock()
		defer mu.Unlock()
		merged.add(i, delta)
		if err != nil {
			errs[i] = fmt.Errorf("item %d: %w", i, err)
		}
	}
	workers := 0
	if n > 0 {
		workers = rs.e.cfg.Limits.InFlight(fe.Workers(), n)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := claim(); i >= 0; i = claim() {
				it := f.child(scopeOf(f.scope, s.ID, "item", strconv.Itoa(i)))
				it.env, it.named = env, named
				it.bind(name, items[i])
				if index != "" {
					it.bind(index, int64(i))
				}
				out, err := rs.traceList(ctx, it, fe.Steps, "item", s)
				finish(i, it.delta, err)
				if err != nil && errors.Is(err, errParked) && !rs.realStop(err) {
					// A waiting item keeps its slot: this worker starts no
					// more items; the others go on.
					return
				}
				if err != nil {
					mu.Lock()
					failed = true
					mu.Unlock()
					continue
				}
				outs[i] = out
			}
		}()
	}
	wg.Wait()
	f.set(merged.result())
	failures := make([]int, 0, len(errs))
	for i := range errs {
		failures = append(failures, i)
	}
	slices.Sort(failures)
	ordered := make([]error, len(failures))
	for k, i := range failures {
		ordered[k] = errs[i]
	}
	if err := rs.joinError(ordered); err != nil {
		return nil, err
	}
	return outs, nil
}

// orderedMerge merges the context changes of concurrent children as if
// they were applied in index order, whatever order they finish in: for
// each key, the value of the highest index that set it wins. It holds one
// entry per key, never the changes of a child that finished early.
type orderedMerge struct {
	acc map[string]indexedValue
}

type indexedValue struct {
	index int
	v     any
}

func newOrderedMerge() *orderedMerge {
	return &orderedMerge{acc: map[string]indexedValue{}}
}

// add records child i's changes (nil: none).
func (m *orderedMerge) add(i int, delta map[string]any) {
	for k, v := range delta {
		if old, ok := m.acc[k]; !ok || old.index < i {
			m.acc[k] = indexedValue{index: i, v: v}
		}
	}
}

// result returns every change, as merged.
func (m *orderedMerge) result() map[string]any {
	out := make(map[string]any, len(m.acc))
	for k, iv := range m.acc {
		out[k] = iv.v
	}
	return out
}

// laneCancelled is the cancellation cause of the lanes a fail_fast
// parallel cancels because one lane failed.
type laneCancelled struct{ stepID, lane string }

func (c *laneCancelled) Error() string {
	return fmt.Sprintf("cancelled: lane %s of parallel step %s failed (fail_fast)", c.lane, c.stepID)
}

// notStepFailure reports whether a lane's err is neither a step's
// recorded failure nor parking nor the run stopping: an error of the
// engine or the store (a write that failed), which ends the attempt.
func notStepFailure(err error) bool {
	var sf *stepFailed
	var lost *raceLost
	return !errors.As(err, &sf) && !errors.Is(err, errParked) && !errors.As(err, &lost)
}

// raceLost is the cancellation cause of the lanes of a race that another
// lane won: their steps in flight end cancelled (type cancelled, step rows
// recorded cancelled).
type raceLost struct{ stepID, winner string }

func (c *raceLost) Error() string {
	return fmt.Sprintf("cancelled: lane %s won the race of parallel step %s", c.winner, c.stepID)
}

// execRace runs a parallel step in mode race (its `when` evaluated, its
// row entered as try): every lane at once, each in its own frame; the
// first lane to succeed wins. The winner is decided once: the construct's
// completion (output {lane, output}, context changes: the winner's only)
// is committed as soon as it is known — before the other lanes are
// cancelled (cause raceLost: their steps in flight recorded cancelled,
// the rest skipped, their durable waits closed) — so a resumed run
// restores it whole. A run cut off after a lane's last step committed but
// before the completion did finds that lane finished in its checkpoints
// (raceFinished) and declares it the winner without running any lane; of
// several such lanes, the one whose last checkpoint was committed first.
//
// When every lane failed, the step fails with the failure of the last
// lane to fail. A lane parked at a durable wait keeps the race open: the
// run parks once no lane is running, and the race is re-entered on wake.
func (rs *runState) execRace(ctx context.Context, f, body *frame, s *workflow.Step, try int) (any, error) {
	p := s.Parallel
	names := p.LaneNames()
	frames := make([]*frame, len(names))
	for i, name := range names {
		frames[i] = body.child(scopeOf(body.scope, s.ID, "lane", name))
	}
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		mu          sync.Mutex
		winner      = -1
		result      any   // the race's output, once decided
		decided     error // why the completion was not written: the output expression, the store
		storeFailed bool  // decided is the store's error (not the step's failure)
		lastFail    error
		errs        = make([]error, len(names))
		wg          sync.WaitGroup
	)
	// win commits the race's completion for lane i (under mu, once).
	win := func(i int, out any) {
		winner = i
		body.merge(frames[i])
		res := map[string]any{"lane": names[i], "output": out}
		shaped, err := rs.shapeOutput(ctx, f, s, res)
		if err == nil {
			wctx, wcancel := context.WithTimeout(context.WithoutCancel(rs.root), releaseTimeout)
			err = rs.complete(wctx, f, s, try, false, shaped, body.delta)
			wcancel()
			var bad unencodable
			storeFailed = err != nil && !errors.As(err, &bad)
		}
		result, decided = shaped, err
		cancel(&raceLost{stepID: s.ID, winner: names[i]})
	}
	// Re-entered (the race parked at a lane's wait in an earlier execution
	// of this attempt): lanes that failed then are not run again. A race
	// that ended and runs again as a new try (an enclosing try re-entered)
	// runs every lane.
	reentered := rs.openTry(f.scope, s.ID) > 0
	run := func(i int) {
		if failed := rs.laneFailed(frames[i].scope, p.Lanes[names[i]]); reentered && failed != nil {
			// The lane failed in an earlier execution of this attempt (the
			// race parked on another lane's wait): it is not run again.
			mu.Lock()
			defer mu.Unlock()
			errs[i] = fmt.Errorf("lane %s: %w", names[i], failed)
			lastFail = errs[i]
			return
		}
		out, err := rs.traceList(lctx, frames[i], p.Lanes[names[i]], "lane", s)
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			if winner < 0 {
				win(i, out)
			}
			return
		}
		errs[i] = fmt.Errorf("lane %s: %w", names[i], err)
		if !rs.stopping(err) {
			lastFail = errs[i]
		}
	}
	if i := rs.raceFinished(body.scope, s, names); i >= 0 {
		run(i) // restored from its checkpoints: nothing runs; the other lanes' open rows are closed below
	} else {
		for i := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(i)
			}()
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil && rs.realStop(err) {
			return nil, err
		}
	}
	if winner < 0 {
		for _, err := range errs {
			if err != nil && errors.Is(err, errParked) {
				// A lane waits: the race is still open, whatever the
				// others did — unless one of them ended with an error
				// that is not its step's failure (a write of the store
				// that failed): parking then would leave the run waiting
				// with that lane's work unrecorded (found by the chaos
				// harness: a race parked for its slow lane's hour-long
				// wait after its fast lane's completion failed to commit).
				// The attempt ends with that error instead.
				for _, other := range errs {
					if other != nil && notStepFailure(other) {
						return nil, other
					}
				}
				return nil, err
			}
		}
		err := rs.joinError(errs)
		if lastFail != nil {
			err = lastFail
		}
		for _, fr := range frames {
			body.merge(fr) // no rollback: what succeeded inside stays applied
		}
		f.set(body.delta)
		return nil, rs.fail(f, s, try, err)
	}
	if decided != nil {
		// The completion was not written: the output expression failed,
		// the output cannot be stored, or the run is stopping.
		if storeFailed || rs.stopping(decided) {
			return nil, decided
		}
		f.set(body.delta)
		return nil, rs.fail(f, s, try, decided)
	}
	// The lanes that lost and wait at a durable wait are given up, and
	// what an earlier execution of this attempt left open in them (a
	// construct or wait they were cancelled before re-entering) closed.
	lost := &raceLost{stepID: s.ID, winner: names[winner]}
	for i, name := range names {
		if i == winner {
			continue
		}
		if err := rs.closeWaiting(frames[i].scope, p.Lanes[name], lost); err != nil {
			return nil, err
		}
		if err := rs.cancelOpen(frames[i].scope, lost); err != nil {
			return nil, err
		}
	}
	return result, nil
}

// laneFailed returns the failure of a lane of list (run in scope) that
// failed in an earlier execution of this attempt: a step of the lane's
// own list whose row is failed (a failure there fails the lane); nil when
// none is. Its type is not kept in the row: the failure reads as an
// untyped error with the row's message.
func (rs *runState) laneFailed(scope string, list []*workflow.Step) error {
	for _, st := range list {
		if row := rs.found[scope+"\x00"+st.ID]; row != nil && row.Status == starflowtype.StepFailed {
			info := &starflowtype.ErrorInfo{Type: starflowtype.ErrorUntyped, Message: row.Error, StepID: st.ID, ScopePath: &scope}
			return &stepFailed{stepID: st.ID, kind: st.Kind(), scope: scope, err: step.Permanent(errors.New(row.Error)),
				info: info, innerKind: st.Kind()}
		}
	}
	return nil
}

// cancelOpen records as cancelled the step rows below scope that an
// earlier execution of this attempt left open (running or waiting) and
// that this one did not take over: the lanes that lost a race.
func (rs *runState) cancelOpen(scope string, why error) error {
	for _, st := range rs.found {
		if st.Status != starflowtype.StepRunning && st.Status != starflowtype.StepWaiting {
			continue
		}
		if st.ScopePath != scope && !strings.HasPrefix(st.ScopePath, scope+"/") || rs.led.wrote(st.ScopePath, st.StepID) {
			continue // not in the lane, or this execution took the row over
		}
		if err := rs.giveUp(st.ScopePath, st.StepID, st.Kind, max(st.Tries, 1), why, true); err != nil {
			return err
		}
	}
	return nil
}

// raceFinished returns the lane of race s whose steps all have
// checkpoints (it finished before the run was cut off, and the race's
// completion was not committed), the one whose last checkpoint is oldest
// when there are several (ties: lane name order); -1 when none did.
func (rs *runState) raceFinished(scope string, s *workflow.Step, names []string) int {
	best := -1
	var bestAt time.Time
	for i, name := range names {
		laneScope := scopeOf(scope, s.ID, "lane", name)
		var last time.Time
		done := true
		for _, st := range s.Parallel.Lanes[name] {
			cp, ok := rs.restored[laneScope+"\x00"+st.ID]
			if !ok {
				if row := rs.found[laneScope+"\x00"+st.ID]; row != nil && row.Status == starflowtype.StepSkipped {
					continue // skipped (its when was false): done, with no checkpoint
				}
				done = false
				break
			}
			if cp.CreatedAt.After(last) {
				last = cp.CreatedAt
			}
		}
		if done && (best < 0 || last.Before(bestAt)) {
			best, bestAt = i, last
		}
	}
	return best
}

// execParallel runs every lane at once, lane NAME in scope
// <id>.lane_<NAME>. The output maps each lane name to its last output.
//
// With fail_fast (the default), the first lane to fail cancels the others
// and the step fails with that failure. Decision: a cancelled lane's step
// in flight ends with the cancellation and is recorded failed, with the
// error "cancelled: lane X of parallel step P failed (fail_fast)"; its
// steps that had not started are recorded skipped, and the constructs
// around them in the lane failed. `cancelled` stays the status of step
// rows an operator's cancellation of the whole run left running. A step
// that completes despite the cancellation (its handler ignored it) is
// recorded succeeded and checkpointed as usual.
//
// Without fail_fast every lane runs to its end, and the step then fails
// with the failure of the first failed lane in lane-name order.
func (rs *runState) execParallel(ctx context.Context, f *frame, s *workflow.Step) (any, error) {
	p := s.Parallel
	names := p.LaneNames()
	lctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	frames := make([]*frame, len(names))
	outs := make([]any, len(names))
	errs := make([]error, len(names))
	var (
		mu    sync.Mutex
		first error // the failure that cancelled the other lanes
		wg    sync.WaitGroup
	)
	for i, name := range names {
		frames[i] = f.child(scopeOf(f.scope, s.ID, "lane", name))
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := rs.traceList(lctx, frames[i], p.Lanes[name], "lane", s)
			if err == nil {
				outs[i] = out
				return
			}
			err = fmt.Errorf("lane %s: %w", name, err)
			errs[i] = err
			var lc *laneCancelled
			if !p.FailsFast() || rs.stopping(err) || errors.As(err, &lc) || ctx.Err() != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first == nil {
				first = err
				cancel(&laneCancelled{stepID: s.ID, lane: name})
			}
		}()
	}
	wg.Wait()
	for _, fr := range frames {
		f.merge(fr)
	}
	for _, err := range errs {
		if err != nil && rs.realStop(err) {
			return nil, err
		}
	}
	if first != nil {
		return nil, first
	}
	if err := rs.joinError(errs); err != nil {
		return nil, err
	}
	out := make(map[string]any, len(names))
	for i, name := range names {
		out[name] = outs[i]
	}
	return out, nil
}

// joinError is the error a construct with concurrent children fails
// with: the run stopping comes first (nothing more is written for it),
// then the first failure in the fixed order of errs.
//
// A child that parked at a durable wait ranks last: a sibling's failure
// fails the construct; otherwise the construct parks once every child
// ended or parked.
func (rs *runState) joinError(errs []error) error {
	var first error
	for _, err := range errs {
		if err != nil && rs.errRank(err) > rs.errRank(first) {
			first = err
		}
	}
	return first
}

// jsonType names the JSON type of a value, for error messages.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case []any:
		return "a list"
	default:
		return "a number"
	}
}
