package mirror

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/warm"
)

// RunEntry projects a cold run and its current steps (the instances
// running or waiting in its current attempt) to the warm entry, with
// version and the drift hash set.
func RunEntry(r *starflowtype.Run, current []warm.StepEntry, version int64) *warm.RunEntry {
	e := &warm.RunEntry{
		RunID:        r.ID,
		WorkspaceID:  r.WorkspaceID,
		WorkflowName: r.WorkflowName,
		Status:       string(r.Status),
		ClaimState:   string(r.ClaimState),
		Phase:        r.Phase,
		Attempt:      r.Attempt,
		LeasedBy:     r.LeasedBy,
		CurrentSteps: current,
		Error:        r.Error,
		Output:       r.Output,
		Version:      version,
		UpdatedAt:    r.UpdatedAt,
		FinishedAt:   r.CompletedAt,
	}
	sortSteps(e.CurrentSteps)
	e.Hash = Hash(e)
	return e
}

// StepEntry projects a cold step row. Its UpdatedAt is the row's last
// write (database clock), or, for a row that has none, when it finished
// or started.
func StepEntry(s *starflowtype.Step) *warm.StepEntry {
	at := s.UpdatedAt
	if at.IsZero() {
		at = s.FinishedAt
	}
	if at.IsZero() {
		at = s.StartedAt
	}
	return &warm.StepEntry{
		RunID: s.RunID, Attempt: s.Attempt, ScopePath: s.ScopePath, StepID: s.StepID,
		Kind: s.Kind, Status: string(s.Status), Tries: s.Tries, Error: s.Error, UpdatedAt: at,
	}
}

// EventEntry projects a cold event row: the event as stored. A payload
// that is not valid JSON (no store writes one) is carried as a JSON
// string, so the outbox row always encodes.
func EventEntry(e *starflowtype.Event) *warm.EventEntry {
	payload := e.Payload
	if len(payload) > 0 && !json.Valid(payload) {
		payload, _ = json.Marshal(string(payload))
	}
	return &warm.EventEntry{
		ID: e.ID, RunID: e.RunID, Attempt: e.Attempt, EventType: string(e.Type), NodeID: e.NodeID,
		ScopePath: e.ScopePath, Payload: payload, CreatedAt: e.CreatedAt,
	}
}

// CurrentSteps keeps the steps of attempt that are running or waiting, as
// warm entries.
func CurrentSteps(steps []*starflowtype.Step, attempt int) []warm.StepEntry {
	var out []warm.StepEntry
	for _, s := range steps {
		if s.Attempt == attempt && (s.Status == starflowtype.StepRunning || s.Status == starflowtype.StepWaiting) {
			out = append(out, *StepEntry(s))
		}
	}
	sortSteps(out)
	return out
}

func sortSteps(s []warm.StepEntry) {
	slices.SortFunc(s, func(a, b warm.StepEntry) int {
		return cmp.Or(cmp.Compare(a.Attempt, b.Attempt), cmp.Compare(a.ScopePath, b.ScopePath), cmp.Compare(a.StepID, b.StepID))
	})
}

// Hash is the drift hash of a warm run entry (SPEC §8): sha256 over its
// status, claim state, phase, attempt, error, current steps (attempt,
// scope path, step id, status, in that order) and version, hex (32
// digits). The spec's four (status, phase, current steps, version) plus
// the claim state, attempt and error, which live views show too. The
// sweep computes it from the cold rows and from the warm entry's fields
// (never trusting e.Hash) and repairs the entry when they differ.
func Hash(e *warm.RunEntry) string {
	h := sha256.New()
	w := func(s string) { h.Write([]byte(strconv.Quote(s))); h.Write([]byte{0}) }
	w(e.Status)
	w(e.ClaimState)
	w(e.Phase)
	w(strconv.Itoa(e.Attempt))
	w(e.Error)
	w(strconv.FormatInt(e.Version, 10))
	steps := slices.Clone(e.CurrentSteps)
	sortSteps(steps)
	for _, s := range steps {
		w(strconv.Itoa(s.Attempt))
		w(s.ScopePath)
		w(s.StepID)
		w(s.Status)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// projectionHash hashes everything a warm run entry shows except its
// version, hash and updated_at: a write that leaves it unchanged (a lease
// refresh) is not mirrored.
func projectionHash(e *warm.RunEntry) (string, error) {
	c := *e
	c.Version, c.Hash = 0, ""
	c.UpdatedAt = time.Time{}
	b, err := json.Marshal(&c)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}
