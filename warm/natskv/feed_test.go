package natskv

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/starflow/starflow/warm"
)

// TestEncodeFeedBound: a feed over the byte bound loses its oldest events
// first, and a lone event over it loses only its payload.
func TestEncodeFeedBound(t *testing.T) {
	big := json.RawMessage(`"` + strings.Repeat("x", 1000) + `"`)
	var feed []*warm.EventEntry
	for id := int64(1); id <= 20; id++ {
		feed = append(feed, &warm.EventEntry{ID: id, RunID: "r", EventType: "e", Payload: big})
	}
	data, err := encodeFeed(feed, 5000)
	if err != nil {
		t.Fatal(err)
	}
	var got []*warm.EventEntry
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if len(data) > 5000 || len(got) == 0 || len(got) > 4 || got[len(got)-1].ID != 20 {
		t.Fatalf("bounded feed: %d bytes, %d events ending at %d; want <= 5000 bytes, the newest kept", len(data), len(got), got[len(got)-1].ID)
	}
	data, err = encodeFeed(feed[19:], 500)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != 20 || !got[0].PayloadOmitted || got[0].Payload != nil || feed[19].Payload == nil {
		t.Fatalf("lone oversized event: %+v (caller's copy payload %d bytes)", got, len(feed[19].Payload))
	}
}
