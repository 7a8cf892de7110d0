package faultpoint

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// RulesEnvVar names the environment variable holding fault rules. Only
// binaries built with -tags chaos read it (cmd/starflow's chaos wiring);
// this package never reads it, so a production build cannot be made to
// inject faults by the environment.
const RulesEnvVar = "STARFLOW_FAULTS"

// ErrInjected is wrapped by every error a fail rule (or a hang ended by
// its context) returns.
var ErrInjected = errors.New("faultpoint: injected")

// Action is what a rule does at its point.
type Action string

// The actions.
const (
	// Fail returns an error wrapping ErrInjected (not at pause points).
	Fail Action = "fail"
	// Delay sleeps for the rule's duration, cut short by the context.
	Delay Action = "delay"
	// Hang blocks until the context is done, or for the duration if given
	// (forever at a pause point without one).
	Hang Action = "hang"
	// Exit kills the process with SIGKILL.
	Exit Action = "exit"
)

// Rules is a parsed STARFLOW_FAULTS spec, installed with Set. Its trigger
// counters and RNG are its own: installing a fresh Parse starts over.
type Rules struct {
	rules []*rule
	mu    sync.Mutex // guards rng
	rng   *rand.Rand
}

type trigger byte

const (
	always  trigger = iota
	rate            // pF
	nthCall         // #N
	every           // %N
)

type rule struct {
	text   string
	point  string // without the trailing '*' when prefix
	prefix bool
	action Action
	dur    time.Duration // 0: none given
	trig   trigger
	p      float64
	n      int64
	calls  atomic.Int64
}

var active atomic.Pointer[Rules]

// Set installs r process-wide (nil clears) and returns a function that
// reinstalls what was there before. Installing needs no build tag.
func Set(r *Rules) (restore func()) {
	old := active.Swap(r)
	return func() { active.Store(old) }
}

// Clear removes the installed rules.
func Clear() { active.Store(nil) }

// Parse parses a spec: rules separated by ';', each "seed=N" or
// "POINT=ACTION[:ARG][@TRIGGER]" (see docs/faults.md). An empty spec gives
// no rules. The error names the bad rule.
func Parse(spec string) (*Rules, error) {
	seed := int64(1)
	r := &Rules{}
	for _, tok := range strings.Split(spec, ";") {
		tok = strings.TrimSpace(tok)
		if tok == "" {
			continue
		}
		if k, v, ok := strings.Cut(tok, "="); ok && strings.TrimSpace(k) == "seed" {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("faultpoint: rule %q: seed is not an integer", tok)
			}
			seed = n
			continue
		}
		ru, err := parseRule(tok)
		if err != nil {
			return nil, fmt.Errorf("faultpoint: rule %q: %w", tok, err)
		}
		r.rules = append(r.rules, ru)
	}
	r.rng = rand.New(rand.NewSource(seed))
	return r, nil
}

func parseRule(tok string) (*rule, error) {
	point, act, ok := strings.Cut(tok, "=")
	point, act = strings.TrimSpace(point), strings.TrimSpace(act)
	if !ok || point == "" {
		return nil, errors.New("want POINT=ACTION[:ARG][@TRIGGER]")
	}
	ru := &rule{text: tok, point: point}
	if p, ok := strings.CutSuffix(point, "*"); ok {
		ru.point, ru.prefix = p, true
	}
	if strings.ContainsAny(ru.point, "*=@; \t") {
		return nil, errors.New("point: '*' only at the end, no spaces, '=', '@' or ';'")
	}
	if a, t, ok := strings.Cut(act, "@"); ok {
		act = strings.TrimSpace(a)
		if err := ru.parseTrigger(strings.TrimSpace(t)); err != nil {
			return nil, err
		}
	}
	name, arg, hasArg := strings.Cut(act, ":")
	name, arg = strings.TrimSpace(name), strings.TrimSpace(arg)
	ru.action = Action(name)
	switch ru.action {
	case Fail, Exit:
		if hasArg {
			return nil, fmt.Errorf("action %s takes no argument", name)
		}
	case Delay, Hang:
		if !hasArg {
			if ru.action == Delay {
				return nil, errors.New("delay needs a duration (delay:200ms)")
			}
			break
		}
		d, err := time.ParseDuration(arg)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("action %s: %q is not a positive duration", name, arg)
		}
		ru.dur = d
	default:
		return nil, fmt.Errorf("unknown action %q (fail, delay:DUR, hang[:DUR], exit)", name)
	}
	if ru.action == Fail && !ru.fallible() {
		return nil, errors.New("fail is only for points that return an error (query:…, op:…, begin, commit); a pause point returns nothing")
	}
	return ru, nil
}

func (ru *rule) parseTrigger(t string) error {
	switch {
	case strings.HasPrefix(t, "p"):
		f, err := strconv.ParseFloat(t[1:], 64)
		if err != nil || !(f >= 0 && f <= 1) {
			return fmt.Errorf("trigger %q: want pF with 0 ≤ F ≤ 1", t)
		}
		ru.trig, ru.p = rate, f
	case strings.HasPrefix(t, "#"), strings.HasPrefix(t, "%"):
		n, err := strconv.ParseInt(t[1:], 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("trigger %q: want %cN with N ≥ 1", t, t[0])
		}
		ru.trig, ru.n = nthCall, n
		if t[0] == '%' {
			ru.trig = every
		}
	default:
		return fmt.Errorf("trigger %q: want pF, #N or %%N", t)
	}
	return nil
}

// fallible says whether every point the rule can match returns an error.
func (ru *rule) fallible() bool {
	if strings.HasPrefix(ru.point, "query:") || strings.HasPrefix(ru.point, "op:") {
		return true
	}
	return !ru.prefix && (ru.point == "begin" || ru.point == "commit")
}

func (ru *rule) matches(point string) bool {
	if ru.prefix {
		return strings.HasPrefix(point, ru.point)
	}
	return point == ru.point
}

// pick returns the first rule matching point whose trigger fires on this
// call. Every matching rule counts the call (and a rate rule draws).
func (r *Rules) pick(point string, pause bool) *rule {
	var hit *rule
	for _, ru := range r.rules {
		if !ru.matches(point) || (pause && ru.action == Fail) {
			continue
		}
		c := ru.calls.Add(1)
		fire := false
		switch ru.trig {
		case always:
			fire = true
		case nthCall:
			fire = c == ru.n
		case every:
			fire = c%ru.n == 0
		case rate:
			r.mu.Lock()
			fire = r.rng.Float64() < ru.p
			r.mu.Unlock()
		}
		if fire && hit == nil {
			hit = ru
		}
	}
	return hit
}

// Check runs the rules installed for the point kind+name (say "query:",
// "get_run"; the two are joined only when rules are installed). It
// returns nil at once when none are, an error wrapping ErrInjected for a
// fail (or a hang ended by ctx), ctx's error when a delay is cut short.
func Check(ctx context.Context, kind, name string) error {
	r := active.Load()
	if r == nil {
		return nil
	}
	return r.check(ctx, kind+name)
}

func (r *Rules) check(ctx context.Context, point string) error {
	ru := r.pick(point, false)
	if ru == nil {
		return nil
	}
	announce(point, ru.action)
	switch ru.action {
	case Fail:
		return fmt.Errorf("%w failure at %s", ErrInjected, point)
	case Delay:
		return sleep(ctx, ru.dur)
	case Hang:
		var timeout <-chan time.Time
		if ru.dur > 0 {
			t := time.NewTimer(ru.dur)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w hang at %s: %w", ErrInjected, point, ctx.Err())
		case <-timeout:
			return nil
		}
	case Exit:
		kill()
	}
	return nil
}

// hitRules runs the rules at a pause point (no ctx, no error).
func hitRules(r *Rules, name string) {
	ru := r.pick(name, true)
	if ru == nil {
		return
	}
	announce(name, ru.action)
	switch ru.action {
	case Delay:
		time.Sleep(ru.dur)
	case Hang:
		if ru.dur == 0 {
			select {}
		}
		time.Sleep(ru.dur)
	case Exit:
		kill()
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// announce prints the one stderr line the chaos harness counts.
func announce(point string, a Action) {
	fmt.Fprintf(os.Stderr, "faultpoint injected point=%s action=%s\n", point, a)
}

// kill ends the process as a SIGKILL from outside would.
func kill() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	select {}
}
