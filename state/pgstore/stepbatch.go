package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/starflow/starflow/internal/storecore"
	"github.com/starflow/starflow/starflowtype"
)

// stepStatements are the one-statement form of each step write and the
// events it appends, in order (the statement names them; the core's
// StepWrite must agree).
var stepStatements = map[storecore.StepOp]struct {
	query  string
	events []starflowtype.EventType
}{
	storecore.StepStart:        {"sw_start", []starflowtype.EventType{starflowtype.EventNodeStart}},
	storecore.StepStartSucceed: {"sw_start_succeed", []starflowtype.EventType{starflowtype.EventNodeStart, starflowtype.EventNodeComplete}},
	storecore.StepRetry:        {"sw_retry", []starflowtype.EventType{starflowtype.EventNodeRetry}},
	storecore.StepSucceed:      {"sw_succeed", []starflowtype.EventType{starflowtype.EventNodeComplete}},
	storecore.StepFail:         {"sw_fail", []starflowtype.EventType{starflowtype.EventNodeError}},
	storecore.StepSkip:         {"sw_skip", []starflowtype.EventType{starflowtype.EventNodeSkipped}},
}

// StepWrites implements storecore.StepBatcher: every write is one sw_*
// statement, except that the batch's StepStartSucceed writes (steps
// without external side effects), when there are several, share one:
// sw_start_succeed_many over arrays (manyArgs; a lone one is cheaper as
// sw_start_succeed). The statements go to the server in one pipeline (a
// pgx batch) inside t, so a batch of writes costs one round trip.
func (d *dialect) StepWrites(ctx context.Context, t storecore.Conn, ws []*storecore.StepWrite) error {
	b := &pgx.Batch{}
	c := t.(*tx)
	var many [2][]*storecore.StepWrite // the StepStartSucceed writes, without and with WantRun
	var manyIDs [2][]string
	pure := [2]int{} // the StepStartSucceed writes of each variant
	for _, w := range ws {
		if w.Op == storecore.StepStartSucceed {
			pure[boolIndex(w.WantRun)]++
		}
	}
	for _, w := range ws {
		id, ok := storecore.CanonicalID(w.Key.RunID)
		if !ok {
			continue // no run has that id: not fenced
		}
		if w.Op == storecore.StepStartSucceed && pure[boolIndex(w.WantRun)] > 1 {
			v := boolIndex(w.WantRun)
			many[v], manyIDs[v] = append(many[v], w), append(manyIDs[v], id)
			continue
		}
		args, err := stepArgs(id, w)
		if err != nil {
			return err
		}
		name := stepStatements[w.Op].query
		if w.WantRun {
			name += "_run"
		}
		b.Queue(query(name), args...).QueryRow(func(r pgx.Row) error { return translate(storecore.ScanStepWrite(r, id, w)) })
	}
	for v, group := range many {
		if len(group) == 0 {
			continue
		}
		args, err := manyArgs(manyIDs[v], group)
		if err != nil {
			return err
		}
		name := "sw_start_succeed_many"
		if v == 1 {
			name += "_run"
		}
		ids := manyIDs[v]
		b.Queue(query(name), args...).Query(func(rows pgx.Rows) error {
			i := 0
			for ; rows.Next(); i++ {
				if i >= len(group) {
					return fmt.Errorf("step writes: %s returned more than %d rows", name, len(group))
				}
				if err := storecore.ScanStepWrite(rows, ids[i], group[i]); err != nil {
					return translate(err)
				}
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("step writes: %w", translate(err))
			}
			if i != len(group) {
				return fmt.Errorf("step writes: %s returned %d rows for %d writes", name, i, len(group))
			}
			return nil
		})
	}
	if b.Len() == 0 {
		return nil
	}
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return fmt.Errorf("step writes: %w", translate(err))
	}
	return nil
}

// boolIndex is 1 for true, 0 for false.
func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// manyArgs are the arguments of sw_start_succeed_many for the writes ws of
// runs ids (queries.sql): one array per column, one element per write,
// and the writes' blobs flattened with their writes' ordinals (from 1).
func manyArgs(ids []string, ws []*storecore.StepWrite) ([]any, error) {
	n := len(ws)
	var (
		runners                   = make([]string, n)
		epochs                    = make([]int64, n)
		attempts, tries           = make([]int32, n), make([]int32, n)
		scopes, steps, kinds      = make([]string, n), make([]string, n), make([]string, n)
		refuse                    = make([]bool, n)
		starts, completes         = make([]*string, n), make([]*string, n)
		contexts, outputs         = make([]*string, n), make([]*string, n)
		contextBlobs, outputBlobs = make([]*string, n), make([]*string, n)
		blobOwners                []int64
		blobSums                  []string
		blobData                  [][]byte
	)
	for i, w := range ws {
		payloads, err := eventPayloads(w)
		if err != nil {
			return nil, err
		}
		var cp storecore.CheckpointIn
		if w.Checkpoint != nil {
			cp = *w.Checkpoint
		}
		runners[i], epochs[i], attempts[i], scopes[i], steps[i] = w.Lease.RunnerID, w.Lease.Epoch, int32(w.Key.Attempt), w.Key.ScopePath, w.Key.StepID
		kinds[i], tries[i], refuse[i] = w.Kind, int32(w.Try), w.RefuseCancelled
		starts[i], completes[i] = textOrNull(payloads[0]), textOrNull(payloads[1])
		contexts[i], outputs[i] = textOrNull(string(cp.Context)), textOrNull(string(cp.Output))
		contextBlobs[i], outputBlobs[i] = textOrNull(cp.ContextBlob), textOrNull(cp.OutputBlob)
		for _, bl := range w.Blobs {
			blobOwners, blobSums, blobData = append(blobOwners, int64(i+1)), append(blobSums, bl.Sum), append(blobData, bl.Data)
		}
	}
	return []any{ids, runners, epochs, attempts, scopes, steps, kinds, tries, refuse, starts, completes,
		contexts, outputs, contextBlobs, outputBlobs, blobOwners, blobSums, blobData}, nil
}

// textOrNull is s, or NULL when s is empty.
func textOrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// stepArgs are the arguments of w's sw_* statement (queries.sql).
func stepArgs(id string, w *storecore.StepWrite) ([]any, error) {
	ps, err := eventPayloads(w)
	if err != nil {
		return nil, err
	}
	payloads := make([]any, len(ps))
	for i, p := range ps {
		if p != "" {
			payloads[i] = p
		}
	}
	args := []any{id, w.Lease.RunnerID, w.Lease.Epoch, w.Key.Attempt, w.Key.ScopePath, w.Key.StepID}
	switch w.Op {
	case storecore.StepStart:
		args = append(args, w.Kind, w.Try, w.RefuseCancelled, payloads[0])
	case storecore.StepRetry:
		args = append(args, w.Try, w.Error, payloads[0])
	case storecore.StepStartSucceed:
		args = append(append(args, w.Kind, w.Try, w.RefuseCancelled, payloads[0], payloads[1]), checkpointArgs(w)...)
	case storecore.StepSucceed:
		args = append(append(args, w.Try, payloads[0]), checkpointArgs(w)...)
	case storecore.StepFail:
		args = append(args, w.Kind, w.Try, w.Error, payloads[0], string(w.FailStatus()))
	case storecore.StepSkip:
		args = append(args, w.Kind, payloads[0])
	}
	return args, nil
}

// eventPayloads are the payloads of w's events ("" for none), checked
// against the events its statement appends.
func eventPayloads(w *storecore.StepWrite) ([]string, error) {
	want := stepStatements[w.Op].events
	if len(w.Events) != len(want) {
		return nil, fmt.Errorf("step write %s: %d events, its statement appends %v", w.Key.StepID, len(w.Events), want)
	}
	payloads := make([]string, len(w.Events))
	for i, e := range w.Events {
		if e.Type != want[i] {
			return nil, fmt.Errorf("step write %s: event %s, its statement appends %v", w.Key.StepID, e.Type, want)
		}
		payloads[i] = string(e.Payload)
	}
	return payloads, nil
}

// checkpointArgs are a success's checkpoint and blob arguments.
func checkpointArgs(w *storecore.StepWrite) []any {
	var cp storecore.CheckpointIn
	if w.Checkpoint != nil {
		cp = *w.Checkpoint
	}
	sums := make([]string, len(w.Blobs))
	data := make([][]byte, len(w.Blobs))
	for i, bl := range w.Blobs {
		sums[i], data[i] = bl.Sum, bl.Data
	}
	return []any{string(cp.Context), string(cp.Output), nullText(cp.ContextBlob), nullText(cp.OutputBlob), sums, data}
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}
