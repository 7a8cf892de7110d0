package mirror_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/starflow/starflow/mirror"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/warm"
	"github.com/starflow/starflow/warm/memory"
)

func rowsString(rows []*state.OutboxRow) string {
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "[%d %s v%d] ", r.ID, r.Kind, r.Version)
	}
	return b.String()
}

// replay is a state.Outbox whose DrainOutbox hands the same rows to apply
// again (a row applied twice: a drainer that died before marking it).
type replay struct {
	state.Outbox
	rows []*state.OutboxRow
}

func (r replay) DrainOutbox(ctx context.Context, _ *state.DrainOutboxParams, apply state.OutboxApplyFunc) (int, error) {
	ids, err := apply(ctx, r.rows)
	return len(ids), err
}

// TestEventRows: every cold write appends one event row per event it
// appended, with the version of the write's run row; after draining, the
// run's warm feed equals its cold events; rows applied again add nothing.
func TestEventRows(t *testing.T) {
	forEachBackend(t, func(t *testing.T, open func(hooks ...state.TxHook) cold) {
		ctx := context.Background()
		c := open(mirror.Hook())
		r := execRun(t, c, 3)
		coldEvs, err := c.ListEvents(ctx, &state.ListEventsParams{RunID: r.ID})
		if err != nil {
			t.Fatal(err)
		}
		if len(coldEvs) < 3+2*3 {
			t.Fatalf("cold has %d events, want at least queued, claimed, started, 3×(node_start, node_complete), succeeded", len(coldEvs))
		}
		rows := unapplied(t, c)
		runVersions := map[int64]bool{}
		for _, row := range rows {
			if row.Kind == state.OutboxKindRun {
				runVersions[row.Version] = true
			}
		}
		var evRows []*warm.EventEntry
		for i, row := range rows {
			if row.Kind != state.OutboxKindEvent {
				continue
			}
			var e warm.EventEntry
			if err := json.Unmarshal(row.Payload, &e); err != nil {
				t.Fatalf("event row %d payload %s: %v", row.ID, row.Payload, err)
			}
			if !runVersions[row.Version] || row.RunID != r.ID || e.RunID != r.ID {
				t.Fatalf("event row %d (event %d, run %s) has version %d, no run row of the write has it: %s", row.ID, e.ID, row.RunID, row.Version, rowsString(rows))
			}
			// The write's run row follows its event rows.
			j := i
			for j < len(rows) && rows[j].Kind != state.OutboxKindRun {
				j++
			}
			if j == len(rows) || rows[j].Version != row.Version {
				t.Fatalf("event row %d (v%d) is not followed by its write's run row: %s", row.ID, row.Version, rowsString(rows))
			}
			evRows = append(evRows, &e)
		}
		sameEvents(t, "outbox event rows", evRows, coldEvs)

		ws := memory.New()
		d := mirror.NewDrainer(c, mirror.Config{Warm: ws}, nil)
		for {
			n, err := d.DrainOnce(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		feed, err := ws.ListEvents(ctx, r.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, "warm feed after drain", feed, coldEvs)

		// Every row applied again (in one pass, then the event rows one by
		// one): the feed is unchanged.
		again := mirror.NewDrainer(replay{Outbox: c, rows: rows}, mirror.Config{Warm: ws}, nil)
		if n, err := again.DrainOnce(ctx); err != nil || n != len(rows) {
			t.Fatalf("re-apply = %d, %v; want %d rows", n, err, len(rows))
		}
		for _, row := range rows {
			if row.Kind == state.OutboxKindEvent {
				one := mirror.NewDrainer(replay{Outbox: c, rows: []*state.OutboxRow{row}}, mirror.Config{Warm: ws}, nil)
				if _, err := one.DrainOnce(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		feed, err = ws.ListEvents(ctx, r.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, "warm feed after re-applying every row", feed, coldEvs)

		// Bounded by Config.EventsKeep: the newest kept.
		small := memory.New()
		ds := mirror.NewDrainer(replay{Outbox: c, rows: rows}, mirror.Config{Warm: small, EventsKeep: 4}, nil)
		if _, err := ds.DrainOnce(ctx); err != nil {
			t.Fatal(err)
		}
		feed, err = small.ListEvents(ctx, r.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		sameEvents(t, "feed kept to 4", feed, coldEvs[len(coldEvs)-4:])
	})
}

// sameEvents fails unless got and want are the same events (id, type,
// node, attempt, scope path, creation time), in order.
func sameEvents(t *testing.T, what string, got []*warm.EventEntry, want []*starflowtype.Event) {
	t.Helper()
	show := func() string {
		var b strings.Builder
		for _, e := range got {
			fmt.Fprintf(&b, "%d:%s ", e.ID, e.EventType)
		}
		b.WriteString("; want ")
		for _, e := range want {
			fmt.Fprintf(&b, "%d:%s ", e.ID, e.Type)
		}
		return b.String()
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %s", what, show())
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.ID || g.EventType != string(w.Type) || g.NodeID != w.NodeID || g.Attempt != w.Attempt ||
			g.ScopePath != w.ScopePath || !g.CreatedAt.Equal(w.CreatedAt) || g.RunID != w.RunID {
			t.Fatalf("%s: event %d = %+v, want %+v (%s)", what, i, g, w, show())
		}
	}
}
