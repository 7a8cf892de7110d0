package expr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/checker"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
	"cel.dev/cel-go/ext"
)

// Names lists the variables visible to expressions.
var Names = []string{"input", "variables", "steps", "item", "error", "env", "secrets", "run", "output"}

// Limits bound one evaluation.
type Limits struct {
	// Cost is the CEL runtime cost limit of one evaluation. Default
	// CostDefault.
	Cost uint64
	// Timeout bounds the wall-clock time of one evaluation. Default
	// TimeoutDefault.
	Timeout time.Duration
}

// Defaults for Limits.
const (
	CostDefault    uint64 = 1_000_000
	TimeoutDefault        = 100 * time.Millisecond
)

// ErrTooCostly is wrapped by the error of Compile (and so of ParseTemplate
// and ParseExpr) when the static cost estimate of an expression already
// exceeds the cost limit.
var ErrTooCostly = errors.New("expression is too costly")

// maxCached bounds the number of compiled programs an Env keeps.
const maxCached = 4096

// Env compiles and caches expressions. It is safe for concurrent use.
//
// An Env declares Names; With derives one that declares more (the `as`
// name of a for_each loop), with a cache of its own.
type Env struct {
	env    *cel.Env
	limits Limits
	names  []string // every declared variable: Names, then the extra ones
	extra  []string // the names With added, sorted
	mu     sync.Mutex
	cache  map[string]cel.Program
	// compiling serialises compilation: cel-go v0.33's checker races on
	// its lazily built symbol catalog when one cel.Env checks several
	// expressions at once (found by go test -race). Derived environments
	// share their root's lock: an extended cel.Env shares the root's
	// declarations.
	compiling *sync.Mutex

	root    *Env            // the environment With was first called on (nil: this one)
	derived map[string]*Env // root only: by extra names joined with ","
}

// libraries returns the extension libraries every Env enables, each
// pinned to the latest version cel-go v0.33.2 has: an unpinned library
// follows cel-go, and a newer version may change what a stored
// definition's expression means when a run resumes. docs/expressions.md
// lists every function they declare (TestDocListsEveryFunction fails when
// it does not).
func libraries() []cel.EnvOption {
	return []cel.EnvOption{
		ext.Strings(ext.StringsVersion(5)),
		ext.Math(ext.MathVersion(3)),
		ext.Lists(ext.ListsVersion(5)),
		ext.Sets(ext.SetsVersion(0)),
		ext.Encoders(ext.EncodersVersion(2)),
		ext.Bindings(ext.BindingsVersion(1)),
		ext.TwoVarComprehensions(ext.TwoVarComprehensionsVersion(0)),
		cel.OptionalTypes(cel.OptionalTypesVersion(4)),
	}
}

// NewEnv returns an environment with the given limits (zero fields take
// their defaults).
func NewEnv(l Limits) (*Env, error) {
	if l.Cost == 0 {
		l.Cost = CostDefault
	}
	if l.Timeout == 0 {
		l.Timeout = TimeoutDefault
	}
	opts := libraries()
	for _, n := range Names {
		opts = append(opts, cel.Variable(n, cel.DynType))
	}
	e, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("expr: %w", err)
	}
	guards, err := guardOptions(e, l.Cost)
	if err != nil {
		return nil, fmt.Errorf("expr: %w", err)
	}
	guards = append(guards, encoderCostModel(l.Cost))
	if e, err = e.Extend(guards...); err != nil {
		return nil, fmt.Errorf("expr: %w", err)
	}
	return &Env{env: e, limits: l, names: Names, cache: map[string]cel.Program{}, compiling: &sync.Mutex{},
		derived: map[string]*Env{}}, nil
}

// With returns an environment that declares, besides this one's names,
// each of names as a variable of dynamic type (a for_each loop's `as`
// name). Names already declared are ignored, so With on an environment
// that declares them all returns it unchanged. Derived environments are
// cached by their set of extra names: asking twice yields the same *Env,
// whose compiled programs are cached like any other's. Expressions compiled
// by the result must be evaluated by it (Eval, EvalTemplate), which binds
// the extra names too; a name missing from the variables is null.
func (e *Env) With(names ...string) (*Env, error) {
	extra := slices.Clone(e.extra)
	for _, n := range names {
		if !slices.Contains(e.names, n) && !slices.Contains(extra, n) {
			extra = append(extra, n)
		}
	}
	if len(extra) == len(e.extra) {
		return e, nil
	}
	slices.Sort(extra)
	root := e
	if e.root != nil {
		root = e.root
	}
	key := strings.Join(extra, ",")
	root.mu.Lock()
	d, ok := root.derived[key]
	root.mu.Unlock()
	if ok {
		return d, nil
	}
	opts := make([]cel.EnvOption, 0, len(extra))
	for _, n := range extra {
		opts = append(opts, cel.Variable(n, cel.DynType))
	}
	root.compiling.Lock()
	ce, err := root.env.Extend(opts...)
	root.compiling.Unlock()
	if err != nil {
		return nil, fmt.Errorf("expr: declare %s: %w", key, err)
	}
	d = &Env{env: ce, limits: root.limits, names: append(slices.Clone(Names), extra...), extra: extra,
		cache: map[string]cel.Program{}, compiling: root.compiling, root: root}
	root.mu.Lock()
	defer root.mu.Unlock()
	if old, ok := root.derived[key]; ok {
		return old, nil // another goroutine derived it first
	}
	if len(root.derived) >= maxDerived {
		root.derived = map[string]*Env{}
	}
	root.derived[key] = d
	return d, nil
}

// maxDerived bounds the derived environments a root keeps.
const maxDerived = 256

var defaultEnv = sync.OnceValues(func() (*Env, error) { return NewEnv(Limits{}) })

// Default returns the shared environment with default limits.
func Default() *Env {
	e, err := defaultEnv()
	if err != nil {
		panic(err) // the built-in declarations are static; a failure is a bug
	}
	return e
}

// Compile checks and plans one CEL expression (without the `${{ }}`).
// Errors say what is wrong in the expression's own words.
func (e *Env) Compile(src string) (cel.Program, error) {
	e.mu.Lock()
	p, ok := e.cache[src]
	e.mu.Unlock()
	if ok {
		return p, nil
	}
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("empty expression")
	}
	e.compiling.Lock()
	defer e.compiling.Unlock()
	ast, iss := e.env.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s", oneLine(iss.Err().Error()))
	}
	est, err := e.env.EstimateCost(ast, zeroEstimator{})
	if err == nil && est.Min > e.limits.Cost {
		return nil, fmt.Errorf("%w: estimated cost %d exceeds the limit %d", ErrTooCostly, est.Min, e.limits.Cost)
	}
	p, err = e.env.Program(ast,
		cel.CostLimit(e.limits.Cost),
		cel.InterruptCheckFrequency(100),
		cel.EvalOptions(cel.OptOptimize),
	)
	if err != nil {
		return nil, fmt.Errorf("%s", oneLine(err.Error()))
	}
	e.mu.Lock()
	if len(e.cache) >= maxCached {
		// Bound the memory that distinct expressions (from definitions
		// submitted for validation, say) can hold: start over.
		e.cache = make(map[string]cel.Program, maxCached)
	}
	e.cache[src] = p
	e.mu.Unlock()
	return p, nil
}

// Eval evaluates a compiled program with vars (missing names are null) and
// converts the result to plain Go values.
func (e *Env) Eval(ctx context.Context, p cel.Program, vars map[string]any) (any, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, e.limits.Timeout)
	defer cancel()
	act := make(map[string]any, len(e.names))
	for _, n := range e.names {
		if v, ok := vars[n]; ok {
			act[n] = v
		} else {
			act[n] = nil
		}
	}
	out, _, err := p.ContextEval(ctx, act)
	if err != nil {
		if parent.Err() != nil {
			// The caller was cancelled meanwhile (a lane that lost its
			// race, a step's timeout): that, not the expression, ended it.
			return nil, &CancelledError{Cause: context.Cause(parent)}
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("expression exceeded its time limit of %s", e.limits.Timeout)
		}
		msg := oneLine(err.Error())
		if strings.Contains(msg, "actual cost limit exceeded") {
			return nil, fmt.Errorf("expression exceeded its cost limit of %d", e.limits.Cost)
		}
		if _, call, ok := strings.Cut(msg, costGuardMsg+": "); ok {
			return nil, fmt.Errorf("expression exceeded its cost limit of %d (%s)", e.limits.Cost, call)
		}
		return nil, errors.New(msg)
	}
	return ToNative(out)
}

// ToNative converts a CEL value to plain Go values: nil, bool, int64,
// float64, string, []any, map[string]any (bytes become a string;
// timestamps RFC 3339 strings; durations Go duration strings).
func ToNative(v ref.Val) (any, error) {
	switch v.Type() {
	case types.NullType:
		return nil, nil
	case types.BoolType:
		return bool(v.(types.Bool)), nil
	case types.IntType:
		return int64(v.(types.Int)), nil
	case types.UintType:
		u := uint64(v.(types.Uint))
		if u > math.MaxInt64 {
			return float64(u), nil
		}
		return int64(u), nil
	case types.DoubleType:
		return float64(v.(types.Double)), nil
	case types.StringType:
		return string(v.(types.String)), nil
	case types.BytesType:
		return string(v.(types.Bytes)), nil
	case types.TimestampType:
		return v.(types.Timestamp).Time.UTC().Format(time.RFC3339Nano), nil
	case types.DurationType:
		return v.(types.Duration).Duration.String(), nil
	case types.OptionalType:
		o := v.(*types.Optional)
		if !o.HasValue() {
			return nil, nil
		}
		return ToNative(o.GetValue())
	case types.ErrType:
		// An error held by a value rather than returned (json.parse of a
		// number out of a double's range gives an optional of one).
		return nil, errors.New(oneLine(v.(*types.Err).Error()))
	}
	if l, ok := v.(traits.Lister); ok {
		n := int(l.Size().(types.Int))
		out := make([]any, 0, n)
		for i := 0; i < n; i++ {
			x, err := ToNative(l.Get(types.Int(i)))
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	if m, ok := v.(traits.Mapper); ok {
		out := map[string]any{}
		it := m.Iterator()
		for it.HasNext() == types.True {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map key %v is not a string", k)
			}
			x, err := ToNative(m.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = x
		}
		return out, nil
	}
	if nv, err := v.ConvertToNative(reflect.TypeOf((*any)(nil)).Elem()); err == nil {
		return nv, nil
	}
	return nil, fmt.Errorf("value of type %s cannot be stored", v.Type().TypeName())
}

// zeroEstimator gives no size hints, so estimates are lower bounds on
// constant work; only expressions provably over the limit are rejected.
type zeroEstimator struct{}

func (zeroEstimator) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (zeroEstimator) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

func oneLine(s string) string {
	s = strings.TrimPrefix(s, "ERROR: <input>:")
	fields := strings.Fields(s)
	return strings.Join(fields, " ")
}
