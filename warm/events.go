package warm

import (
	"cmp"
	"slices"
)

// ValidateEvents checks the arguments of AppendEvents: runID set, every
// event non-nil with a positive id, an event_type and run_id == runID.
func ValidateEvents(runID string, evs []*EventEntry) error {
	if runID == "" {
		return invalid("AppendEvents: empty run_id")
	}
	for i, e := range evs {
		switch {
		case e == nil:
			return invalid("AppendEvents: run %s: event %d is nil", runID, i)
		case e.ID <= 0:
			return invalid("AppendEvents: run %s: event %d has id %d (want > 0)", runID, i, e.ID)
		case e.EventType == "":
			return invalid("AppendEvents: run %s: event %d (id %d) has an empty event_type", runID, i, e.ID)
		case e.RunID != runID:
			return invalid("AppendEvents: run %s: event %d (id %d) belongs to run %q", runID, i, e.ID, e.RunID)
		}
	}
	return nil
}

// MergeEvents is the feed update of AppendEvents shared by the stores:
// feed (sorted by id, as stored) plus the events of add whose ids it does
// not hold, sorted by id, the newest keep kept (keep <= 0:
// EventsKeepDefault). Changed reports whether the result differs from
// feed. The result shares entries with feed and add; callers that keep it
// clone what they took from add.
func MergeEvents(feed, add []*EventEntry, keep int) (out []*EventEntry, changed bool) {
	if keep <= 0 {
		keep = EventsKeepDefault
	}
	have := make(map[int64]bool, len(feed)+len(add))
	for _, e := range feed {
		have[e.ID] = true
	}
	out = slices.Clone(feed)
	for _, e := range add {
		if have[e.ID] {
			continue
		}
		have[e.ID] = true
		out = append(out, e)
	}
	if len(out) == len(feed) {
		return feed, false
	}
	slices.SortFunc(out, func(a, b *EventEntry) int { return cmp.Compare(a.ID, b.ID) })
	if len(out) > keep {
		out = out[len(out)-keep:]
	}
	if len(out) == len(feed) && slices.Equal(out, feed) {
		return feed, false // every added event was older than a full feed
	}
	return out, true
}

// EventsAfter returns the events of feed (sorted by id) with id > afterID.
func EventsAfter(feed []*EventEntry, afterID int64) []*EventEntry {
	i, _ := slices.BinarySearchFunc(feed, afterID, func(e *EventEntry, id int64) int {
		if e.ID <= id {
			return -1
		}
		return 1
	})
	return feed[i:]
}
