package e2e

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// bigWF is a for_each of as many items as its input holds, each a step
// skipped but for the last item's, which fails.
const bigWF = `name: big
max_attempts: 1
steps:
  - id: start
    context_set: {xs: "${{ input.xs }}"}
  - id: each
    for_each:
      items: "${{ variables.xs }}"
      steps:
        - id: check
          when: "${{ item == size(variables.xs) - 1 }}"
          fail: {message: "the last item is refused"}
`

// TestBigForEachStaysUsable: the page of a run of a for_each of 1,000
// items follows the run to its end, and the finished run's page stays a
// page a person can scroll (bounded timeline and ledger, every failed
// row in both, the whole ledger one click away). How long its main
// thread blocks and how soon it shows the end are logged, not asserted:
// under -race on a loaded CI machine they measure the machine (measured
// at 5,000 items on a quiet one: the end shown 0.3 s after it, the
// longest freeze 0.4 s, the finished page drawn in 0.3 s).
func TestBigForEachStaysUsable(t *testing.T) {
	const items = 1000
	e := newEnv(t)
	e.apply(bigWF)
	xs := make([]int, items)
	for i := range xs {
		xs[i] = i
	}
	in, _ := json.Marshal(map[string]any{"xs": xs})
	id := e.enqueue("big", string(in))
	ctx := browser(t)
	run(t, ctx, "open the run", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`main[data-ready="run"]`)))
	eval[bool](t, ctx, `(() => {
		window.__gap = 0; let last = performance.now();
		const tick = () => { const n = performance.now(); window.__gap = Math.max(window.__gap, n - last); last = n; setTimeout(tick, 20); };
		tick(); return true;
	})()`)
	var ended time.Time
	for deadline := time.Now().Add(4 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := e.store.GetRun(context.Background(), &state.GetRunParams{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == starflowtype.RunFailed {
			ended = time.Now()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s", id, r.Status)
		}
	}
	for eval[string](t, ctx, `document.querySelector('main').dataset.status`) != "failed" {
		if time.Since(ended) > 90*time.Second {
			t.Fatal("the page had not shown the run's end 90 s after it")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("the page showed the run's end %v after it; its main thread was blocked for %.0f ms at most",
		time.Since(ended), eval[float64](t, ctx, `window.__gap`))

	run(t, ctx, "open the failed run", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`main[data-ready="run"]`)))
	t.Logf("the finished run's page drew in %.0f ms", eval[float64](t, ctx, `Number(document.querySelector('main').dataset.drawnMs)`))
	if n := count(t, ctx, `*`); n > 30000 {
		t.Errorf("the finished run's page holds %d elements", n)
	}
	if h := eval[float64](t, ctx, `document.documentElement.scrollHeight`); h > 20000 {
		t.Errorf("the finished run's page is %.0f px high", h)
	}
	if n := count(t, ctx, `svg.gantt rect.b-failed`); n < 2 { // the item's check and the for_each
		t.Errorf("the timeline shows %d failed bars, want the failed item's and the for_each's", n)
	}
	if n := count(t, ctx, `#ledger .s-failed`); n < 2 {
		t.Errorf("the ledger shows %d failed rows, want the failed item's and the for_each's", n)
	}
	run(t, ctx, "the whole ledger", chromedp.Click(css(`#ledger-all`)), chromedp.WaitNotPresent(css(`#ledger-all`)))
	if n := count(t, ctx, `#ledger tbody tr`); n != items+2 {
		t.Errorf("the whole ledger has %d rows, want %d", n, items+2)
	}
}

// TestSettledRunStopsReloading: a page that watched its run to the end
// stops reading it (it read the whole ledger again every 5 s for as long
// as it stayed open).
func TestSettledRunStopsReloading(t *testing.T) {
	e := newEnv(t)
	id := e.enqueue("hold", `{}`)
	e.waitStatus(id, starflowtype.RunPaused)
	ctx := browser(t)
	run(t, ctx, "open the waiting run", chromedp.Navigate(e.url+"/runs/"+id), chromedp.WaitVisible(css(`main[data-ready="run"]`)))
	eval[bool](t, ctx, `performance.setResourceTimingBufferSize(100000), true`)
	if _, err := e.eng.Signal(context.Background(), id, "go", nil); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "its end", chromedp.WaitVisible(css(`main[data-status="succeeded"]`)))
	reads := `performance.getEntriesByType('resource').filter((r) => r.name.includes('/ledger')).length`
	before := eval[int](t, ctx, reads)
	time.Sleep(11 * time.Second)
	if n := eval[int](t, ctx, reads) - before; n > 1 {
		t.Errorf("the settled run's page read its ledger %d times in 11 s", n)
	}
}
