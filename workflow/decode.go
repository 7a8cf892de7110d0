package workflow

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/starflow/starflow/internal/expr"
)

// Field names, in the order the schema and messages list them.
var (
	definitionFields  = []string{"name", "recovery_mode", "runner_pool", "max_attempts", "input_schema", "secrets", "defaults", "steps", "output", "retry_on", "schedules", "retention"}
	defaultsFields    = []string{"timeout", "retry_policy"}
	retryPolicyFields = []string{"max_attempts", "initial_interval", "backoff", "max_interval", "jitter", "retry_on"}
	stepFields        = []string{"id", "when", "run_after", "retry_policy", "timeout", "output"}
	stepKinds         = []string{"service_call", "context_set", "fail", "if", "try", "repeat_until", "for_each", "parallel", "switch", "pass", "wait", "workflow_call", "session_read", "session_write", "job"}
	serviceCallFields = []string{"method", "url", "headers", "query", "body", "expect_status"}
	failFields        = []string{"message", "type", "details"}
	jitterModes       = []string{JitterFull, JitterEqual, JitterNone}

	// unimplementedKinds are the kinds of SPEC §2 this version does not
	// parse yet; the names are reserved (no custom type may take them).
	// None today: a kind added to the spec before the parser knows it goes
	// here.
	unimplementedKinds = []string{}

	recoveryModes = []string{"replay", "resume", "manual"}
	httpMethods   = []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
)

// ReservedPrefix starts the context keys the engine keeps for itself
// (__celestialWait, __celestialCheckout, …); definitions may not write them.
const ReservedPrefix = "__celestial"

// IsStepField reports whether name is a per-step field (id, when,
// run_after, retry_policy, timeout, output) rather than a step kind.
func IsStepField(name string) bool { return slices.Contains(stepFields, name) }

// reservedStepKey reports whether name cannot be a custom step type: a
// step field or a built-in kind, implemented or not.
func reservedStepKey(name string) bool {
	return IsStepField(name) || slices.Contains(stepKinds, name) || slices.Contains(unimplementedKinds, name)
}

// ValidID reports whether s matches [a-z0-9][a-z0-9_-]* (workflow names,
// step ids, lane names and custom step type names).
func ValidID(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// validSecretName reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func validSecretName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// decoder turns a value tree into a Definition, reporting every problem.
type decoder struct {
	errs   *errorList
	src    *source
	opts   ParseOptions
	limits Limits     // opts.Limits with defaults
	steps  []*stepSrc // every step, nested ones included, in the order decoded
	lists  []*listSrc // every steps list

	depth    int      // constructs being decoded around the current step
	loopVars []string // for_each `as` names in scope that expressions do not declare

	// Where the expression being decoded is evaluated (scope.go).
	cur      *stepSrc    // the step whose field is being decoded; nil at the top
	loops    []loopBind  // enclosing for_each bindings, innermost last
	inCatch  int         // catch lists being decoded around the current step
	inError  int         // expressions over `error` being decoded (catch_when, retry_on)
	inOutput bool        // decoding a step's own output expression
	sites    []*exprSite // every string holding expressions, for checkRefs
}

// stepSrc keeps the positions validation needs after decoding.
type stepSrc struct {
	step     *Step
	idPos    Pos
	after    []Pos // of each RunAfter entry
	hasAfter bool
	list     *listSrc // the list the step is in
	index    int      // its index in list.steps
}

// listSrc is one steps list: run_after resolves within it.
type listSrc struct {
	steps  []*stepSrc
	desc   string   // where it is, for messages: "the top-level steps"
	parent *stepSrc // the construct holding the list; nil for the top-level steps
	field  string   // which list of the construct: "try.catch", "for_each.steps", …
	reach  map[int][]bool
}

func (d *decoder) errorf(p Pos, format string, args ...any) {
	d.errs.add(p, nil, format, args...)
}

// typeError reports that n is not what field must be; nothing when n
// could not be decoded (that is reported already).
func (d *decoder) typeError(n *vnode, field, want string) {
	if n.kind != vInvalid {
		d.errorf(n.pos, "%s must be %s, not %s", field, want, n.describe())
	}
}

// fields calls f for each key of the mapping n that is in allowed and
// reports the others. what names n in messages.
func (d *decoder) fields(n *vnode, what string, allowed []string, f func(p vpair)) bool {
	if n.kind != vMap {
		d.typeError(n, what, "a mapping")
		return false
	}
	for _, p := range n.pairs {
		if !slices.Contains(allowed, p.key) {
			d.errorf(p.keyPos, "unknown field %q in %s%s; allowed: %s", p.key, what, suggest(p.key, allowed), strings.Join(allowed, ", "))
			continue
		}
		f(p)
	}
	return true
}

func (d *decoder) str(n *vnode, field string) (string, bool) {
	if n.kind != vString {
		d.typeError(n, field, "a string")
		return "", false
	}
	return n.s, true
}

func (d *decoder) integer(n *vnode, field string, min int64) (int, bool) {
	if n.kind != vInt {
		d.typeError(n, field, "an integer")
		return 0, false
	}
	if n.i < min {
		d.errorf(n.pos, "%s must be at least %d", field, min)
		return 0, false
	}
	if int64(int(n.i)) != n.i {
		d.errorf(n.pos, "%s is out of range", field)
		return 0, false
	}
	return int(n.i), true
}

func (d *decoder) duration(n *vnode, field string) (Duration, bool) {
	if n.kind != vString {
		d.typeError(n, field, `a duration string like "30s"`)
		return 0, false
	}
	v, err := ParseDuration(n.s)
	if tooLarge(err) {
		d.errorf(n.pos, "%s: duration %q is %v", field, n.s, err)
		return 0, false
	}
	if err != nil {
		d.errorf(n.pos, "%s: invalid duration %q (write it like 500ms, 30s, 5m or 72h)", field, n.s)
		return 0, false
	}
	if v <= 0 {
		d.errorf(n.pos, "%s must be positive", field)
		return 0, false
	}
	return Duration(v), true
}

func (d *decoder) definition(root *vnode) *Definition {
	def := &Definition{}
	seen := map[string]bool{}
	var schedules *vnode
	if !d.fields(root, "the definition", definitionFields, func(p vpair) {
		seen[p.key] = true
		n := p.val
		switch p.key {
		case "name":
			if s, ok := d.str(n, "name"); ok {
				if !ValidID(s) {
					d.errorf(n.pos, "name %q must match [a-z0-9][a-z0-9_-]*", s)
				}
				def.Name = s
			}
		case "recovery_mode":
			if s, ok := d.str(n, "recovery_mode"); ok {
				if !slices.Contains(recoveryModes, s) {
					d.errorf(n.pos, "recovery_mode must be one of %s, not %q", strings.Join(recoveryModes, ", "), s)
				}
				def.RecoveryMode = s
			}
		case "runner_pool":
			if s, ok := d.str(n, "runner_pool"); ok {
				if s == "" {
					d.errorf(n.pos, "runner_pool must not be empty (leave it out for any pool)")
				}
				def.RunnerPool = s
			}
		case "max_attempts":
			def.MaxAttempts, _ = d.integer(n, "max_attempts", 1)
		case "input_schema":
			d.inputSchema(def, n)
		case "secrets":
			def.Secrets = d.secrets(n)
		case "defaults":
			def.Defaults = d.defaults(n)
		case "steps":
			def.Steps = d.stepList(n, "steps", "the top-level steps")
		case "output":
			def.Output = d.template(n, "output")
		case "retry_on":
			def.RetryOn = d.errorExpr(n, "retry_on")
		case "schedules":
			def.Schedules, schedules = d.schedules(n), n
		case "retention":
			def.Retention = d.retention(n)
		}
	}) {
		return def
	}
	if !seen["name"] {
		d.errorf(root.pos, `missing required field "name"`)
	}
	if !seen["steps"] {
		d.errorf(root.pos, `missing required field "steps"`)
	}
	d.checkGraph()
	if !d.opts.Stored {
		d.checkRefs()
		d.checkSchedules(def, schedules)
	}
	return def
}

func (d *decoder) secrets(n *vnode) []string {
	if n.kind != vList {
		d.typeError(n, "secrets", "a list of names")
		return nil
	}
	var out []string
	first := map[string]Pos{}
	for _, it := range n.items {
		s, ok := d.str(it, "a secret name")
		if !ok {
			continue
		}
		if !validSecretName(s) {
			d.errorf(it.pos, "secret name %q must match [A-Za-z_][A-Za-z0-9_]*", s)
		}
		if p, dup := first[s]; dup {
			d.errorf(it.pos, "secret %q is listed twice (first at line %d)", s, p.Line)
			continue
		}
		first[s] = it.pos
		out = append(out, s)
	}
	return out
}

func (d *decoder) defaults(n *vnode) *Defaults {
	out := &Defaults{}
	d.fields(n, "defaults", defaultsFields, func(p vpair) {
		switch p.key {
		case "timeout":
			out.Timeout, _ = d.duration(p.val, "defaults.timeout")
		case "retry_policy":
			out.RetryPolicy = d.retryPolicy(p.val, "defaults.retry_policy")
		}
	})
	return out
}

func (d *decoder) retryPolicy(n *vnode, what string) *RetryPolicy {
	rp := &RetryPolicy{}
	var maxPos Pos
	d.fields(n, what, retryPolicyFields, func(p vpair) {
		field := what + "." + p.key
		switch p.key {
		case "max_attempts":
			rp.MaxAttempts, _ = d.integer(p.val, field, 1)
		case "initial_interval":
			rp.InitialInterval, _ = d.duration(p.val, field)
		case "max_interval":
			rp.MaxInterval, _ = d.duration(p.val, field)
			maxPos = p.val.pos
		case "jitter":
			if s, ok := d.str(p.val, field); ok {
				if !slices.Contains(jitterModes, s) {
					d.errorf(p.val.pos, "%s must be one of %s, not %q", field, strings.Join(jitterModes, ", "), s)
				}
				rp.Jitter = s
			}
		case "retry_on":
			rp.RetryOn = d.errorExpr(p.val, field)
		case "backoff":
			switch p.val.kind {
			case vInt:
				rp.Backoff = float64(p.val.i)
			case vFloat:
				rp.Backoff = p.val.f
			default:
				d.typeError(p.val, field, "a number")
				return
			}
			if rp.Backoff < 1 {
				d.errorf(p.val.pos, "%s must be at least 1", field)
				rp.Backoff = 0
			}
		}
	})
	if rp.InitialInterval > 0 && rp.MaxInterval > 0 && rp.MaxInterval < rp.InitialInterval {
		d.errorf(maxPos, "%s.max_interval (%s) is less than initial_interval (%s)", what, time.Duration(rp.MaxInterval), time.Duration(rp.InitialInterval))
	}
	return rp
}

// stepList decodes a steps list. field names it in messages ("steps",
// "if.then"), desc says where it is ("the then list of step \"x\"").
func (d *decoder) stepList(n *vnode, field, desc string) []*Step {
	if n.kind != vList {
		d.typeError(n, field, "a list")
		return nil
	}
	if len(n.items) == 0 {
		d.errorf(n.pos, "%s must not be empty", field)
		return nil
	}
	l := &listSrc{desc: desc, parent: d.cur, field: field}
	d.lists = append(d.lists, l)
	out := make([]*Step, 0, len(n.items))
	for _, it := range n.items {
		if src := d.step(it, l); src != nil {
			out = append(out, src.step)
			l.steps = append(l.steps, src)
		}
	}
	return out
}

type kindKey struct {
	name string
	pos  Pos
	val  *vnode
}

func (d *decoder) step(n *vnode, l *listSrc) *stepSrc {
	if n.kind != vMap {
		d.typeError(n, "a step", "a mapping")
		return nil
	}
	s := &Step{Pos: d.src.orig(n.pos)}
	src := &stepSrc{step: s, list: l, index: len(l.steps)}
	d.steps = append(d.steps, src)
	outer := d.cur
	d.cur = src
	defer func() { d.cur = outer }()
	var kinds []kindKey
	var retryPos, timeoutPos Pos
	hasID, kindReported := false, false
	for _, p := range n.pairs {
		v := p.val
		switch p.key {
		case "id":
			hasID = true
			if id, ok := d.str(v, "id"); ok {
				if !ValidID(id) {
					d.errorf(v.pos, "step id %q must match [a-z0-9][a-z0-9_-]*", id)
				}
				s.ID, src.idPos = id, v.pos
			}
		case "when":
			s.When = d.when(v)
		case "run_after":
			src.hasAfter = true
			s.RunAfter, src.after = d.runAfter(v)
		case "retry_policy":
			s.RetryPolicy = d.retryPolicy(v, "retry_policy")
			retryPos = p.keyPos
		case "timeout":
			timeoutPos = p.keyPos
			s.Timeout, _ = d.duration(v, "timeout")
		case "output":
			d.inOutput = true
			s.Output = d.template(v, "output")
			d.inOutput = false
		case "service_call", "context_set", "fail", "if", "try", "repeat_until", "for_each", "parallel",
			"switch", "pass", "wait", "workflow_call", "session_read", "session_write", "job":
			kinds = append(kinds, kindKey{p.key, p.keyPos, v})
		default:
			switch {
			case slices.Contains(unimplementedKinds, p.key):
				d.errorf(p.keyPos, "step kind %q is not supported by this version of starflow", p.key)
				kindReported = true
			case d.opts.IsStepType != nil && ValidID(p.key) && !reservedStepKey(p.key) && d.opts.IsStepType(p.key):
				kinds = append(kinds, kindKey{p.key, p.keyPos, v})
			default:
				d.errorf(p.keyPos, "unknown field %q: not a step field or a registered step type%s", p.key, suggest(p.key, append(stepFields[:len(stepFields):len(stepFields)], stepKinds...)))
			}
		}
	}
	if !hasID {
		d.errorf(n.pos, `step is missing its "id"`)
	}
	switch len(kinds) {
	case 0:
		if kindReported {
			break
		}
		d.errorf(n.pos, "step %q has no kind: give it one of %s, or a registered step type", s.ID, strings.Join(stepKinds, ", "))
	case 1:
	default:
		d.errorf(kinds[1].pos, "step %q has more than one kind: %s (line %d) and %s", s.ID, kinds[0].name, kinds[0].pos.Line, kinds[1].name)
	}
	for _, k := range kinds {
		switch k.name {
		case "service_call":
			s.ServiceCall = d.serviceCall(k.val, k.pos)
		case "context_set":
			s.ContextSet = d.contextSet(k.val)
		case "fail":
			s.Fail = d.fail(k.val, k.pos)
		case "if", "try", "repeat_until", "for_each", "parallel", "switch":
			d.construct(s, k)
		case "pass":
			s.Pass = &Pass{Value: d.templateOrNull(k.val, "pass")}
		case "wait", "workflow_call", "session_read", "session_write":
			d.durable(s, k)
		case "job":
			s.Job = d.job(k.val, k.pos)
		default:
			s.Custom = &Custom{Type: k.name, Input: d.templateOrNull(k.val, k.name)}
		}
	}
	if s.Job != nil && s.Timeout > 0 && !d.opts.Stored {
		d.errorf(timeoutPos, "timeout on a job step has no effect: the job's own limits are job.timeout (all its tries) and job.heartbeat_timeout (its lease)")
	}
	if s.RetryPolicy != nil && len(kinds) == 1 && noRetries(s) && !d.opts.Stored {
		d.errorf(retryPos, "retry_policy on a %s step has no effect: %s; put retry_policy on the steps inside it, or leave it out", s.Kind(), whyNoRetries(s))
	}
	return src
}

func (d *decoder) when(n *vnode) any { return d.expression(n, "when", true) }

// expression decodes a value that is one expression (when, if.condition,
// repeat_until.until, for_each.items): a string of bare CEL or of exactly
// one ${{ }}, or, when boolOK, a boolean.
func (d *decoder) expression(n *vnode, field string, boolOK bool) any {
	switch {
	case n.kind == vBool && boolOK:
		return n.b
	case n.kind == vString:
		tpl, err := d.compile(n.s, true)
		if err != nil {
			d.exprError(n, field, err)
			return nil
		}
		if expr.HasExpr(n.s) && !singleExpr(n.s, tpl) {
			d.errorf(n.pos, "%s must be one expression: bare CEL, or exactly one ${{ }} with nothing around it", field)
			return nil
		}
		d.site(n, field, !expr.HasExpr(n.s))
		return n.s
	}
	if boolOK {
		d.typeError(n, field, "a boolean or an expression")
	} else {
		d.typeError(n, field, "an expression")
	}
	return nil
}

// singleExpr reports whether the template s is exactly one `${{ }}`.
func singleExpr(s string, tpl *expr.Template) bool {
	ex := tpl.Exprs()
	return len(ex) == 1 && strings.HasPrefix(s, "${{") && strings.HasSuffix(s, "}}") &&
		strings.TrimSpace(s[3:len(s)-2]) == ex[0]
}

func (d *decoder) runAfter(n *vnode) ([]string, []Pos) {
	if n.kind != vList {
		d.typeError(n, "run_after", "a list of step ids")
		return nil, nil
	}
	ids := []string{} // not nil: an empty list means "no dependency"
	var pos []Pos
	seen := map[string]bool{}
	for _, it := range n.items {
		id, ok := d.str(it, "a run_after entry")
		if !ok {
			continue
		}
		if seen[id] {
			d.errorf(it.pos, "run_after lists %q twice", id)
			continue
		}
		seen[id] = true
		ids, pos = append(ids, id), append(pos, it.pos)
	}
	return ids, pos
}

func (d *decoder) serviceCall(n *vnode, at Pos) *ServiceCall {
	sc := &ServiceCall{}
	hasURL := false
	if !d.fields(n, "service_call", serviceCallFields, func(p vpair) {
		v := p.val
		switch p.key {
		case "method":
			if s, ok := d.str(v, "service_call.method"); ok {
				if !slices.Contains(httpMethods, s) {
					d.errorf(v.pos, "service_call.method %q is not an HTTP method (one of %s)", s, strings.Join(httpMethods, ", "))
				}
				sc.Method = s
			}
		case "url":
			hasURL = true
			s, ok := d.str(v, "service_call.url")
			if !ok {
				return
			}
			sc.URL, _ = d.template(v, "service_call.url").(string)
			if s == "" {
				d.errorf(v.pos, "service_call.url must not be empty")
			} else if !expr.HasExpr(s) {
				if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
					d.errorf(v.pos, "service_call.url %q is not an absolute http or https URL", s)
				}
			}
		case "headers":
			sc.Headers = d.scalarMap(v, "service_call.headers", true)
		case "query":
			sc.Query = d.scalarMap(v, "service_call.query", false)
		case "body":
			sc.Body = d.template(v, "service_call.body")
		case "expect_status":
			sc.ExpectStatus = d.statuses(v)
		}
	}) {
		return sc
	}
	if !hasURL {
		d.errorf(at, `service_call is missing "url"`)
	}
	return sc
}

// scalarMap decodes headers or query parameters: name → scalar template.
func (d *decoder) scalarMap(n *vnode, what string, headers bool) map[string]any {
	if n.kind != vMap {
		d.typeError(n, what, "a mapping")
		return nil
	}
	if len(n.pairs) == 0 {
		return nil
	}
	out := make(map[string]any, len(n.pairs))
	for _, p := range n.pairs {
		if headers && !validHeaderName(p.key) {
			d.errorf(p.keyPos, "%q is not a valid HTTP header name", p.key)
		}
		switch p.val.kind {
		case vString, vInt, vFloat, vBool:
			out[p.key] = d.template(p.val, what+"."+p.key)
		default:
			d.typeError(p.val, what+"."+p.key, "a string, number or boolean")
		}
	}
	return out
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func (d *decoder) statuses(n *vnode) []int {
	if n.kind != vList {
		d.typeError(n, "service_call.expect_status", "a list of status codes")
		return nil
	}
	if len(n.items) == 0 {
		d.errorf(n.pos, "service_call.expect_status must list at least one status (leave it out to accept any 2xx)")
		return nil
	}
	var out []int
	for _, it := range n.items {
		if it.kind != vInt {
			d.typeError(it, "an expect_status entry", "an integer")
			continue
		}
		if it.i < 100 || it.i > 599 {
			d.errorf(it.pos, "expect_status %d is not an HTTP status (100–599)", it.i)
			continue
		}
		out = append(out, int(it.i))
	}
	return out
}

func (d *decoder) contextSet(n *vnode) map[string]any {
	if n.kind != vMap {
		d.typeError(n, "context_set", "a mapping of variable names to values")
		return nil
	}
	if len(n.pairs) == 0 {
		d.errorf(n.pos, "context_set must set at least one variable")
		return nil
	}
	out := make(map[string]any, len(n.pairs))
	for _, p := range n.pairs {
		switch {
		case p.key == "":
			d.errorf(p.keyPos, "context_set: a variable name must not be empty")
		case strings.HasPrefix(p.key, ReservedPrefix):
			d.errorf(p.keyPos, "context_set may not write %q: the prefix %s is reserved for the engine", p.key, ReservedPrefix)
		}
		out[p.key] = d.templateOrNull(p.val, "context_set."+p.key)
	}
	return out
}

func (d *decoder) fail(n *vnode, at Pos) *Fail {
	f := &Fail{}
	has := false
	if !d.fields(n, "fail", failFields, func(p vpair) {
		switch p.key {
		case "message":
			has = true
			s, ok := d.str(p.val, "fail.message")
			if !ok {
				return
			}
			if s == "" {
				d.errorf(p.val.pos, "fail.message must not be empty")
			}
			d.template(p.val, "fail.message")
			f.Message = s
		case "type":
			s, ok := d.str(p.val, "fail.type")
			if !ok {
				return
			}
			if !expr.HasExpr(s) && !validErrorType(s) {
				d.errorf(p.val.pos, "fail.type %q must match [A-Za-z_][A-Za-z0-9_.:-]* (at most %d characters), or be an expression", s, maxErrorType)
			}
			d.template(p.val, "fail.type")
			f.Type = s
		case "details":
			f.Details = d.template(p.val, "fail.details")
		}
	}) {
		return f
	}
	if !has {
		d.errorf(at, `fail is missing "message"`)
	}
	return f
}

// maxErrorType bounds the length of an error type (bytes).
const maxErrorType = 128

// validErrorType reports whether s can be an error type: it matches
// [A-Za-z_][A-Za-z0-9_.:-]* and is at most maxErrorType bytes long
// ("http", "PaymentDeclined", "States.Timeout").
func validErrorType(s string) bool {
	if s == "" || len(s) > maxErrorType {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case (c >= '0' && c <= '9' || c == '.' || c == ':' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// ValidErrorType reports whether s can be the type of a typed error: it
// matches [A-Za-z_][A-Za-z0-9_.:-]* and is at most 128 bytes long.
func ValidErrorType(s string) bool { return validErrorType(s) }

// errorExpr decodes a boolean expression over `error` (retry_on,
// catch_when): error is in scope, and the expression must yield a
// boolean.
func (d *decoder) errorExpr(n *vnode, field string) any {
	d.inError++
	defer func() { d.inError-- }()
	return d.boolExpr(n, field)
}

// boolExpr decodes an expression by nature (like when) that must yield a
// boolean: a literal boolean, or an expression whose type is bool (or
// dyn, known only when it runs).
func (d *decoder) boolExpr(n *vnode, field string) any {
	v := d.expression(n, field, true)
	s, ok := v.(string)
	if !ok {
		return v
	}
	src := s
	if expr.HasExpr(s) {
		src = strings.TrimSpace(s[3 : len(s)-2])
	}
	env := d.opts.Expr
	if len(d.loopVars) > 0 {
		var err error
		if env, err = env.With(d.loopVars...); err != nil {
			return v
		}
	}
	if t, err := env.OutputType(src); err == nil && t != "bool" && t != "dyn" {
		d.errorf(n.pos, "%s must be a boolean expression; %q yields %s", field, src, t)
		return nil
	}
	return v
}

// template checks every expression in n and returns n's value. null is
// refused (write "${{ null }}" for a null value): it would mean the same
// as leaving the field out.
func (d *decoder) template(n *vnode, field string) any {
	if n.kind == vNull {
		d.errorf(n.pos, "%s must not be null (leave it out, or write \"${{ null }}\")", field)
		return nil
	}
	return d.templateOrNull(n, field)
}

func (d *decoder) templateOrNull(n *vnode, field string) any {
	d.checkExprs(n, field)
	return n.value()
}

// checkExprs compiles every expression in the strings of n.
func (d *decoder) checkExprs(n *vnode, field string) {
	switch n.kind {
	case vString:
		if !expr.HasExpr(n.s) {
			return
		}
		if _, err := d.compile(n.s, false); err != nil {
			d.exprError(n, field, err)
			return
		}
		d.site(n, field, false)
	case vList:
		for i, it := range n.items {
			d.checkExprs(it, fmt.Sprintf("%s[%d]", field, i))
		}
	case vMap:
		for _, p := range n.pairs {
			d.checkExprs(p.val, field+"."+p.key)
		}
	}
}

// exprError reports an expression that does not compile, pointing into
// the string where the expression starts when the string is written on one
// line and the text before the expression has no escapes; at the string
// otherwise.
func (d *decoder) exprError(n *vnode, field string, err error) {
	p := n.pos
	var se *expr.SyntaxError
	off := 0
	if errors.As(err, &se) {
		off = se.Offset
	}
	if off >= 0 && off <= len(n.s) {
		q := -1
		switch n.style {
		case 0:
			q = 0
		case yaml.SingleQuotedStyle, yaml.DoubleQuotedStyle:
			q = 1
		}
		if q >= 0 {
			want := []rune(n.s[:min(len(n.s), off+3)])
			line := d.src.line(n.pos.Line)
			start := n.pos.Column - 1 + q
			if start >= 0 && start+len(want) <= len(line) && slices.Equal(line[start:start+len(want)], want) {
				p.Column = n.pos.Column + q + len([]rune(n.s[:off]))
			}
		}
	}
	d.errs.add(p, err, "%s: %v", field, err)
}
