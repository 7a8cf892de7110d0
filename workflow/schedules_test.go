package workflow

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// Fixtures of schedules, added to validDefs (the schema test, the round
// trip and the fuzz seeds read them) and invalidCases.

var scheduleDefs = map[string]string{
	"schedules.yaml": `name: report
input_schema:
  type: object
  properties:
    region: {type: string, default: eu}
    size: {type: integer}
schedules:
  - cron: "0 9 * * MON-FRI"
    timezone: Europe/Berlin
    input: {size: 3}
    overlap: cancel_previous
    catchup: all
  - cron: "@every 30s"
  - cron: "*/5 * * * * *"
    overlap: allow
    catchup: none
    input: {region: us, size: 1.0}
  - {cron: "@hourly", timezone: UTC}
` + okSteps,
}

const schedHead = "name: a\n" + okSteps

var scheduleInvalid = []invalidCase{
	{"schedules not a list", schedHead + "schedules: {cron: x}\n", "t.yaml:5:12: ", "schedules must be a list of schedules, not a mapping"},
	{"schedule bad cron", schedHead + "schedules:\n  - cron: '61 * * * *'\n", "t.yaml:6:11: ", `schedules[0].cron: cron "61 * * * *": `},
	{"schedule few fields", schedHead + "schedules:\n  - cron: '* *'\n", "t.yaml:6:11: ", `schedules[0].cron: cron "* *": expected 5 to 6 fields`},
	{"schedule never", schedHead + "schedules:\n  - cron: '0 0 30 2 *'\n", "t.yaml:6:11: ", `cron "0 0 30 2 *" never fires`},
	{"schedule every fraction", schedHead + "schedules:\n  - cron: '@every 1500ms'\n", "t.yaml:6:11: ", "@every must be a whole number of seconds, at least 1s"},
	{"schedule every short", schedHead + "schedules:\n  - cron: '@every 100ms'\n", "t.yaml:6:11: ", "@every must be a whole number of seconds"},
	{"schedule tz prefix", schedHead + "schedules:\n  - cron: 'CRON_TZ=Europe/Berlin 0 9 * * *'\n", "t.yaml:6:11: ", "give the zone in the timezone field"},
	{"schedule unknown zone", schedHead + "schedules:\n  - {cron: '@hourly', timezone: Mars/Olympus}\n", "t.yaml:6:33: ", `schedules[0].timezone: unknown timezone "Mars/Olympus"`},
	{"schedule local zone", schedHead + "schedules:\n  - {cron: '@hourly', timezone: Local}\n", "t.yaml:6:33: ", `timezone "Local" differs from machine to machine`},
	{"schedule bad overlap", schedHead + "schedules:\n  - {cron: '@hourly', overlap: queue}\n", "t.yaml:6:32: ", `schedules[0].overlap must be one of skip, allow, cancel_previous, not "queue"`},
	{"schedule bad catchup", schedHead + "schedules:\n  - {cron: '@hourly', catchup: first}\n", "t.yaml:6:32: ", `schedules[0].catchup must be one of none, last, all, not "first"`},
	{"schedule unknown key", schedHead + "schedules:\n  - {cron: '@hourly', timzone: UTC}\n", "t.yaml:6:23: ", `unknown field "timzone" in schedules[0] (did you mean "timezone"?)`},
	{"schedule missing cron", schedHead + "schedules:\n  - {timezone: UTC}\n", "t.yaml:6:5: ", `schedules[0] is missing "cron"`},
	{"schedule cron number", schedHead + "schedules:\n  - {cron: 5}\n", "t.yaml:6:12: ", "schedules[0].cron must be a string, not an integer"},
	{"schedule input list", schedHead + "schedules:\n  - {cron: '@hourly', input: [1]}\n", "t.yaml:6:30: ", "schedules[0].input must be a mapping (the run input), not a list"},
	{"schedule input template", schedHead + "schedules:\n  - {cron: '@hourly', input: {a: '${{ 1 }}'}}\n", "t.yaml:6:34: ", "schedules[0].input is data, not a template"},
	{"schedule second entry", schedHead + "schedules:\n  - cron: '@hourly'\n  - cron: nope\n", "t.yaml:7:11: ", `schedules[1].cron: cron "nope"`},
	{"schedule input schema", "name: a\ninput_schema: {type: object, required: [size]}\n" + okSteps + "schedules:\n  - {cron: '@hourly', input: {other: 1}}\n", "t.yaml:7:5: ", "schedules[0].input does not match input_schema"},
	{"schedule input schema type", "name: a\nschedules:\n  - {cron: '@hourly', input: {size: x}}\ninput_schema: {properties: {size: {type: integer}}}\n" + okSteps, "t.yaml:3:5: ", "schedules[0].input does not match input_schema"},
}

func init() {
	for name, src := range scheduleDefs {
		validDefs[name] = src
	}
	invalidCases = append(invalidCases, scheduleInvalid...)
}

func TestScheduleDefaults(t *testing.T) {
	t.Parallel()
	def, err := Parse("s.yaml", []byte(scheduleDefs["schedules.yaml"]), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(def.Schedules) != 4 {
		t.Fatalf("%d schedules", len(def.Schedules))
	}
	s := def.Schedules[1]
	if s.OverlapOrDefault() != OverlapSkip || s.CatchupOrDefault() != CatchupLast || s.TimezoneOrDefault() != "UTC" {
		t.Errorf("defaults: %q %q %q", s.OverlapOrDefault(), s.CatchupOrDefault(), s.TimezoneOrDefault())
	}
	if got := string(s.InputJSON()); got != "{}" {
		t.Errorf("no input: %s", got)
	}
	if got := string(def.Schedules[2].InputJSON()); got != `{"region":"us","size":1.0}` {
		t.Errorf("input keeps 1.0 a double: %s", got)
	}
	if s.Pos.Line != 13 || s.Pos.Column != 5 {
		t.Errorf("pos %+v", s.Pos)
	}
}

// TestScheduleRevision: a definition without schedules has the revision
// it had before the field existed; one with them differs.
func TestScheduleRevision(t *testing.T) {
	t.Parallel()
	plain, err := Parse("a.yaml", []byte("name: a\n"+okSteps), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(plain.Canonical(), []byte("schedules")) {
		t.Errorf("canonical form names schedules: %s", plain.Canonical())
	}
	// The revision of this definition before issue 15 (main at d26b406).
	const before = "f376a43b89aafc33e74c3936dd6fed1614e6be513e918ed51e70cc07f3a2c54d"
	if plain.Revision() != before {
		t.Errorf("revision %s, was %s", plain.Revision(), before)
	}
	with, err := Parse("a.yaml", []byte("name: a\n"+okSteps+"schedules: [{cron: '@hourly'}]\n"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if with.Revision() == plain.Revision() {
		t.Error("schedules do not change the revision")
	}
	if !strings.Contains(string(with.Canonical()), `"schedules":[{"cron":"@hourly"}]`) {
		t.Errorf("canonical: %s", with.Canonical())
	}
}

func TestScheduleNext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		cron, zone string
		after      string
		want       []string
	}{
		// 09:00 Berlin is 08:00 UTC in winter, 07:00 in summer; the
		// weekend is skipped; DST began on Sunday 2026-03-29.
		{"0 9 * * MON-FRI", "Europe/Berlin", "2026-03-26T12:00:00Z", []string{"2026-03-27T08:00:00Z", "2026-03-30T07:00:00Z", "2026-03-31T07:00:00Z"}},
		{"@every 30s", "", "2026-01-01T00:00:10.5Z", []string{"2026-01-01T00:00:40Z", "2026-01-01T00:01:10Z"}},
		{"*/20 * * * * *", "", "2026-01-01T00:00:10Z", []string{"2026-01-01T00:00:20Z", "2026-01-01T00:00:40Z", "2026-01-01T00:01:00Z"}},
		{"@hourly", "America/New_York", "2026-01-01T00:30:00Z", []string{"2026-01-01T01:00:00Z"}},
		{"30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", []string{"2026-03-30T00:30:00Z"}}, // 02:30 does not exist on 29 March
	}
	for _, c := range cases {
		cr, err := ParseCron(c.cron, c.zone)
		if err != nil {
			t.Fatalf("%s: %v", c.cron, err)
		}
		at, _ := time.Parse(time.RFC3339Nano, c.after)
		var got []string
		for range c.want {
			at = cr.Next(at)
			got = append(got, at.Format(time.RFC3339))
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%s in %q after %s: %v, want %v", c.cron, c.zone, c.after, got, c.want)
		}
	}
}
