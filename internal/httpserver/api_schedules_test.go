package httpserver

import (
	"strings"
	"testing"
	"time"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
)

const scheduledWF = `name: tick
schedules:
  - {cron: "0 9 * * MON-FRI", timezone: Europe/Berlin, overlap: cancel_previous}
  - {cron: "@every 30s", input: {n: 1}}
steps:
  - {id: a, pass: 1}
`

// TestSchedulesAPI: GET /api/schedules lists a workspace's schedules with
// their next fire times, never another workspace's; pause and resume
// need an operator, answer 404 for an unknown workflow, and a key limited
// to an env sees only that env's schedules and cannot pause.
func TestSchedulesAPI(t *testing.T) {
	t.Parallel()
	e := newAPIEnv(t, true, nil)
	for _, ws := range []string{"alpha", "beta"} {
		src := scheduledWF
		if ws == "beta" {
			src = strings.Replace(src, "  - {cron: \"@every 30s\", input: {n: 1}}\n", "", 1)
		}
		if a := e.call("PUT", "/api/workflows/tick", e.keys[ws+"/admin"], src); a.status != 200 {
			t.Fatalf("apply in %s: %d %s", ws, a.status, shortBody(a.body))
		}
	}
	list := func(key, query string) (int, *api.ScheduleList) {
		t.Helper()
		a := e.call("GET", "/api/schedules"+query, key, nil)
		var l api.ScheduleList
		if a.status == 200 {
			a.decode(t, &l)
		}
		return a.status, &l
	}
	status, l := list(e.keys["alpha/viewer"], "")
	if status != 200 || len(l.Schedules) != 2 {
		t.Fatalf("alpha's schedules: %d %+v", status, l)
	}
	s0, s1 := l.Schedules[0], l.Schedules[1]
	if s0.Workflow != "tick" || s0.Index != 0 || s0.Timezone != "Europe/Berlin" || s0.Overlap != "cancel_previous" || s0.Catchup != "last" ||
		s0.Env != "prod" || s0.WorkspaceID != "alpha" || len(s0.NextFireTimes) != 3 || s0.Paused {
		t.Errorf("schedule 0: %+v", s0)
	}
	if h := s0.NextFireTimes[0].In(time.FixedZone("", 0)); h.Minute() != 0 || (h.Hour() != 7 && h.Hour() != 8) {
		t.Errorf("09:00 Berlin is 07:00 or 08:00 UTC, not %v", h)
	}
	if s1.Timezone != "UTC" || s1.Overlap != "skip" || string(s1.Input) != `{"n":1}` || s1.NextFireTimes[1].Sub(s1.NextFireTimes[0]) != 30*time.Second {
		t.Errorf("schedule 1: %+v", s1)
	}
	if _, l := list(e.keys["beta/viewer"], ""); len(l.Schedules) != 1 || l.Schedules[0].WorkspaceID != "beta" {
		t.Errorf("beta sees %+v", l.Schedules)
	}
	if _, l := list(e.keys["alpha/viewer"], "?workflow=tick&next=5"); len(l.Schedules) != 2 || len(l.Schedules[1].NextFireTimes) != 5 {
		t.Errorf("?next=5: %+v", l.Schedules)
	}
	if _, l := list(e.keys["alpha/viewer"], "?workflow=other"); len(l.Schedules) != 0 {
		t.Errorf("?workflow=other: %+v", l.Schedules)
	}
	if status, _ := list(e.keys["alpha/viewer"], "?next=500"); status != 422 && status != 400 {
		t.Errorf("?next=500: %d", status)
	}

	if a := e.call("POST", "/api/schedules/tick/pause", e.keys["alpha/viewer"], nil); a.status != 403 {
		t.Errorf("a viewer pauses: %d", a.status)
	}
	a := e.call("POST", "/api/schedules/tick/pause", e.keys["alpha/operator"], nil)
	var paused api.ScheduleList
	a.decode(t, &paused)
	if a.status != 200 || len(paused.Schedules) != 2 || !paused.Schedules[0].Paused || len(paused.Schedules[0].NextFireTimes) != 0 {
		t.Fatalf("pause: %d %s", a.status, shortBody(a.body))
	}
	if _, l := list(e.keys["beta/viewer"], ""); l.Schedules[0].Paused {
		t.Error("pausing alpha's paused beta's")
	}
	if a := e.call("POST", "/api/schedules/nope/pause", e.keys["alpha/operator"], nil); a.status != 404 ||
		!strings.HasPrefix(a.header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("pause an unknown workflow: %d %s %s", a.status, a.header.Get("Content-Type"), shortBody(a.body))
	}
	if a := e.call("POST", "/api/schedules/only-beta/pause", e.keys["alpha/operator"], nil); a.status != 404 {
		t.Errorf("pause another workspace's workflow: %d", a.status)
	}
	a = e.call("POST", "/api/schedules/tick/resume", e.keys["alpha/operator"], nil)
	var resumed api.ScheduleList
	a.decode(t, &resumed)
	if a.status != 200 || resumed.Schedules[0].Paused || len(resumed.Schedules[1].NextFireTimes) != 3 {
		t.Errorf("resume: %d %s", a.status, shortBody(a.body))
	}

	staging := e.createKey("alpha", "staging", starflowtype.RoleOperator)
	if _, l := list(staging, ""); len(l.Schedules) != 0 {
		t.Errorf("a staging key sees prod's schedules: %+v", l.Schedules)
	}
	if a := e.call("POST", "/api/schedules/tick/pause", staging, nil); a.status != 403 {
		t.Errorf("a key limited to an env pauses: %d", a.status)
	}

	doc := e.call("GET", "/openapi.json", "", nil)
	for _, route := range []string{`"/api/schedules"`, `"/api/schedules/{workflow}/pause"`, `"/api/schedules/{workflow}/resume"`} {
		if !strings.Contains(string(doc.body), route) {
			t.Errorf("the OpenAPI document lacks %s", route)
		}
	}
}
