package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

const nightlyWF = `name: nightly
schedules:
  - {cron: "0 9 * * MON-FRI", timezone: Europe/Berlin}
  - {cron: "@every 30s", overlap: allow, catchup: none}
steps:
  - {id: a, pass: 1}
`

// TestSchedulesPage: the schedules page lists each schedule with its
// cron, zone, rules and next fire times; a viewer gets no Pause button,
// an operator pauses the workflow (the page and the store then say
// paused, with no next fire times) and resumes it.
func TestSchedulesPage(t *testing.T) {
	e := newEnv(t)
	if _, err := e.eng.Apply(context.Background(), "nightly.yaml", []byte(nightlyWF)); err != nil {
		t.Fatal(err)
	}
	viewer, operator := e.key(starflowtype.RoleViewer), e.key(starflowtype.RoleOperator)

	ctx := browser(t)
	signIn(t, ctx, e.url, viewer)
	run(t, ctx, "open the schedules page", chromedp.Navigate(e.url+"/schedules"),
		chromedp.WaitVisible(css(`main[data-ready="schedules"]`)))
	if n := count(t, ctx, `#schedules tbody tr[data-workflow="nightly"]`); n != 2 {
		t.Fatalf("schedules page: %d rows, want 2", n)
	}
	row := text(t, ctx, `#schedules tr[data-index="0"]`)
	for _, want := range []string{"0 9 * * MON-FRI", "Europe/Berlin", "skip", "last", "active"} {
		if !strings.Contains(row, want) {
			t.Errorf("row 0 %q lacks %q", row, want)
		}
	}
	if n := count(t, ctx, `#schedules tr[data-index="1"] td.next div`); n != 3 {
		t.Errorf("row 1: %d next fire times, want 3", n)
	}
	if n := count(t, ctx, `button[data-action]`); n != 0 {
		t.Errorf("a viewer sees %d pause/resume buttons", n)
	}
	screenshot(t, ctx, "schedules")

	ctx = browser(t)
	signIn(t, ctx, e.url, operator)
	run(t, ctx, "pause", chromedp.Navigate(e.url+"/schedules"),
		chromedp.WaitVisible(css(`main[data-ready="schedules"]`)),
		chromedp.Click(css(`button[data-action="pause"][data-workflow="nightly"]`)),
		chromedp.WaitVisible(css(`button[data-action="resume"][data-workflow="nightly"]`)))
	if s := text(t, ctx, `#schedules tr[data-index="1"]`); !strings.Contains(s, "paused") {
		t.Errorf("row 1 after the pause: %q", s)
	}
	if n := count(t, ctx, `#schedules td.next div`); n != 0 {
		t.Errorf("%d next fire times shown while paused", n)
	}
	list, _, err := e.store.ListSchedules(context.Background(), &state.ListSchedulesParams{WorkspaceID: "alpha"})
	if err != nil || len(list) != 2 || !list[0].Paused || !list[1].Paused {
		t.Fatalf("the store after the page's pause: %+v, %v", list, err)
	}
	run(t, ctx, "resume",
		chromedp.Click(css(`button[data-action="resume"][data-workflow="nightly"]`)),
		chromedp.WaitVisible(css(`button[data-action="pause"][data-workflow="nightly"]`)))
	list, _, err = e.store.ListSchedules(context.Background(), &state.ListSchedulesParams{WorkspaceID: "alpha"})
	if err != nil || list[0].Paused {
		t.Fatalf("the store after the page's resume: %+v, %v", list, err)
	}
}
