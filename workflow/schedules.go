package workflow

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // timezones work on machines without zoneinfo

	"github.com/robfig/cron/v3"
)

// Schedule is one entry of a definition's schedules (issue 15): at every
// tick of Cron, in Timezone, maintenance starts one run of the workflow
// with Input (trigger_type schedule), once across every process sharing
// the store.
type Schedule struct {
	// Cron is the schedule as written: five fields (minute hour
	// day-of-month month day-of-week), six with a leading seconds field,
	// or a descriptor (@yearly, @monthly, @weekly, @daily, @midnight,
	// @hourly, @every 30s). Parsed by github.com/robfig/cron/v3.
	Cron string `json:"cron"`
	// Timezone is the IANA zone the cron fields are read in
	// ("Europe/Berlin"); "" means UTC. The zone database is embedded.
	Timezone string `json:"timezone,omitempty"`
	// Input is each run's input (data, not a template); the input
	// schema's defaults apply as for any enqueue. nil: {}.
	Input map[string]any `json:"input,omitempty"`
	// Overlap is what a tick does while the previous run of this schedule
	// has not ended: OverlapSkip (the default: no run for the tick),
	// OverlapAllow (start another), OverlapCancelPrevious (cancel it, then
	// start the new one).
	Overlap string `json:"overlap,omitempty"`
	// Catchup is what happens to ticks missed while no maintenance pass
	// ran (every process down): CatchupLast (the default: one run, for
	// the newest missed tick), CatchupNone (none: the next future tick
	// fires), CatchupAll (one run per missed tick, at most
	// CatchupAllMax, the newest).
	Catchup string `json:"catchup,omitempty"`

	// Pos is where the entry starts in the source (not canonical).
	Pos Pos `json:"-"`

	cron *Cron
}

// Overlap policies of Schedule.Overlap.
const (
	OverlapSkip           = "skip"
	OverlapAllow          = "allow"
	OverlapCancelPrevious = "cancel_previous"
)

// Catch-up policies of Schedule.Catchup.
const (
	CatchupNone = "none"
	CatchupLast = "last"
	CatchupAll  = "all"
)

// Schedule limits.
const (
	// MaxSchedules is how many schedules one definition may declare.
	MaxSchedules = 32
	// CatchupAllMax bounds the runs catchup: all starts for the ticks
	// missed by one schedule: the newest CatchupAllMax missed ticks each
	// get a run, older ones none.
	CatchupAllMax = 100
)

var (
	scheduleFields = []string{"cron", "timezone", "input", "overlap", "catchup"}
	overlapModes   = []string{OverlapSkip, OverlapAllow, OverlapCancelPrevious}
	catchupModes   = []string{CatchupNone, CatchupLast, CatchupAll}
)

// OverlapOrDefault is s.Overlap, or OverlapSkip when it is not set.
func (s *Schedule) OverlapOrDefault() string {
	if s.Overlap == "" {
		return OverlapSkip
	}
	return s.Overlap
}

// CatchupOrDefault is s.Catchup, or CatchupLast when it is not set.
func (s *Schedule) CatchupOrDefault() string {
	if s.Catchup == "" {
		return CatchupLast
	}
	return s.Catchup
}

// TimezoneOrDefault is s.Timezone, or "UTC" when it is not set.
func (s *Schedule) TimezoneOrDefault() string {
	if s.Timezone == "" {
		return "UTC"
	}
	return s.Timezone
}

// InputJSON is the schedule's input as JSON ({} when it has none).
func (s *Schedule) InputJSON() json.RawMessage {
	if s.Input == nil {
		return json.RawMessage("{}")
	}
	b, err := json.Marshal(canonMap(s.Input))
	if err != nil { // the parser only produces JSON values
		panic(fmt.Sprintf("workflow: schedule input: %v", err))
	}
	return b
}

// Next is the schedule's first tick strictly after t (UTC), or the zero
// time when it has none within five years.
func (s *Schedule) Next(t time.Time) time.Time {
	c := s.cron
	if c == nil {
		var err error
		if c, err = ParseCron(s.Cron, s.Timezone); err != nil {
			return time.Time{}
		}
	}
	return c.Next(t)
}

// MarshalJSON writes the entry; input values keep their JSON type (see
// Definition.MarshalJSON).
func (s Schedule) MarshalJSON() ([]byte, error) {
	type plain Schedule
	c := plain(s)
	c.Input = canonMap(c.Input)
	return json.Marshal(c)
}

// Cron is a parsed cron expression read in a timezone.
type Cron struct {
	sched cron.Schedule
	loc   *time.Location
}

// cronParser reads the five standard fields, an optional leading seconds
// field, and the descriptors (@hourly, @every 30s, …).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseCron parses a cron expression (see Schedule.Cron) read in the IANA
// zone timezone ("" = UTC). Errors: an expression robfig/cron refuses,
// a TZ= prefix (the zone is the timezone field), an @every below one
// second or not a whole number of seconds, an expression that never
// fires (30 February), an unknown zone or "Local".
func ParseCron(spec, timezone string) (*Cron, error) {
	loc, err := loadZone(timezone)
	if err != nil {
		return nil, err
	}
	trimmed := strings.TrimSpace(spec)
	if strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ=") {
		return nil, fmt.Errorf("cron %q: give the zone in the timezone field, not as a TZ= prefix", spec)
	}
	if rest, ok := strings.CutPrefix(trimmed, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil {
			return nil, fmt.Errorf("cron %q: @every takes a duration like 30s, 5m or 1h", spec)
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, fmt.Errorf("cron %q: @every must be a whole number of seconds, at least 1s", spec)
		}
	}
	sched, err := cronParser.Parse(trimmed)
	if err != nil {
		return nil, fmt.Errorf("cron %q: %v (five fields: minute hour day-of-month month day-of-week, an optional leading seconds field, or @hourly, @daily, @every 30s …)", spec, err)
	}
	c := &Cron{sched: sched, loc: loc}
	if c.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() && c.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("cron %q never fires", spec)
	}
	return c, nil
}

// Next is the first tick strictly after t, in UTC; the zero time when
// there is none within five years (a cron that never fires).
func (c *Cron) Next(t time.Time) time.Time {
	n := c.sched.Next(t.In(c.loc))
	if n.IsZero() {
		return n
	}
	return n.UTC()
}

// loadZone loads an IANA zone; "" is UTC. "Local" is refused: it would
// mean a different zone on each machine.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, fmt.Errorf(`timezone "Local" differs from machine to machine: name the zone ("Europe/Berlin")`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown timezone %q (an IANA zone name like Europe/Berlin or America/New_York)", name)
	}
	return loc, nil
}

// schedules decodes the schedules field.
func (d *decoder) schedules(n *vnode) []*Schedule {
	if n.kind != vList {
		d.typeError(n, "schedules", "a list of schedules")
		return nil
	}
	if len(n.items) > MaxSchedules {
		d.errorf(n.pos, "schedules: %d schedules, at most %d", len(n.items), MaxSchedules)
		return nil
	}
	var out []*Schedule
	for i, it := range n.items {
		if s := d.schedule(it, fmt.Sprintf("schedules[%d]", i)); s != nil {
			out = append(out, s)
		}
	}
	return out
}

func (d *decoder) schedule(n *vnode, what string) *Schedule {
	s := &Schedule{Pos: n.pos}
	var cronNode *vnode
	hasCron := false
	if !d.fields(n, what, scheduleFields, func(p vpair) {
		field := what + "." + p.key
		v := p.val
		switch p.key {
		case "cron":
			hasCron = true
			if str, ok := d.str(v, field); ok {
				s.Cron, cronNode = str, v
			}
		case "timezone":
			if str, ok := d.str(v, field); ok {
				if _, err := loadZone(str); err != nil {
					d.errorf(v.pos, "%s: %v", field, err)
				}
				s.Timezone = str
			}
		case "input":
			if v.kind != vMap {
				d.typeError(v, field, "a mapping (the run input)")
				return
			}
			if t := templateIn(v); t != nil {
				d.errorf(t.pos, "%s is data, not a template: ${{ }} is not evaluated here", field)
				return
			}
			s.Input, _ = v.value().(map[string]any)
		case "overlap":
			if str, ok := d.str(v, field); ok {
				if !slices.Contains(overlapModes, str) {
					d.errorf(v.pos, "%s must be one of %s, not %q", field, strings.Join(overlapModes, ", "), str)
				}
				s.Overlap = str
			}
		case "catchup":
			if str, ok := d.str(v, field); ok {
				if !slices.Contains(catchupModes, str) {
					d.errorf(v.pos, "%s must be one of %s, not %q", field, strings.Join(catchupModes, ", "), str)
				}
				s.Catchup = str
			}
		}
	}) {
		return nil
	}
	if !hasCron {
		d.errorf(n.pos, "%s is missing %q", what, "cron")
	}
	if cronNode == nil {
		return s
	}
	c, err := ParseCron(s.Cron, "")
	if err != nil {
		d.errorf(cronNode.pos, "%s.cron: %v", what, err)
		return s
	}
	if zone, zerr := loadZone(s.Timezone); zerr == nil {
		c.loc = zone
	}
	s.cron = c
	return s
}

// templateIn returns the first string in n that holds "${{", or nil.
func templateIn(n *vnode) *vnode {
	switch n.kind {
	case vString:
		if strings.Contains(n.s, "${{") {
			return n
		}
	case vList:
		for _, it := range n.items {
			if p := templateIn(it); p != nil {
				return p
			}
		}
	case vMap:
		for _, p := range n.pairs {
			if v := templateIn(p.val); v != nil {
				return v
			}
		}
	}
	return nil
}

// checkSchedules refuses a schedule whose input the input schema (with
// its defaults) would refuse at every tick.
func (d *decoder) checkSchedules(def *Definition, n *vnode) {
	if len(def.InputSchema) == 0 || n == nil || n.kind != vList {
		return
	}
	for i, s := range def.Schedules {
		var input any = map[string]any{}
		if s.Input != nil {
			input = s.Input
		}
		withDefaults, _, err := def.ApplyDefaults(input)
		if err == nil {
			err = def.ValidateInput(withDefaults)
		}
		if err != nil {
			at := s.Pos
			if i < len(n.items) {
				at = n.items[i].pos
			}
			d.errorf(at, "schedules[%d].input does not match input_schema: %v", i, err)
		}
	}
}
