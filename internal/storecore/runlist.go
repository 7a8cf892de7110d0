package storecore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

// ListRunsLimitDefault is ListRunsParams.Limit when it is not positive.
const ListRunsLimitDefault = 50

// minID and maxID are the lowest and highest canonical uuids.
const (
	minID = "00000000-0000-0000-0000-000000000000"
	maxID = "ffffffff-ffff-ffff-ffff-ffffffffffff"
)

// ListRuns implements state.Adapter: one statement, of the list_runs
// variant whose index serves the filters given (ListRunsQuery), reading
// that index in (created_at, id) descending order from the page's
// position on.
func (s *Store) ListRuns(ctx context.Context, p *state.ListRunsParams) ([]*starflowtype.Run, error) {
	query, args, err := ListRunsQuery(p, s.d.TimePrecision())
	if err != nil {
		return nil, s.errorf("list runs: %w", err)
	}
	if query == "" {
		return nil, nil
	}
	rows, err := s.reader().Query(ctx, query, args...)
	if err != nil {
		return nil, s.errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []*starflowtype.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, s.errorf("list runs: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.errorf("list runs: %w", err)
	}
	return out, nil
}

// ListRunsQuery returns the query ListRuns runs for p on a dialect whose
// times have precision prec, and its arguments ("" when no run can
// match): list_runs_children for a parent's runs, list_runs_any for every
// workspace's, list_runs_status for a workspace's runs in some statuses,
// else list_runs. pgstore's plan tests explain the same (ExplainListRuns).
func ListRunsQuery(p *state.ListRunsParams, prec time.Duration) (string, []any, error) {
	l, err := newListing(p, prec)
	if err != nil || l.none {
		return "", nil, err
	}
	query := "list_runs"
	switch {
	case l.parent != nil:
		query = "list_runs_children"
	case p.WorkspaceID == "":
		query = "list_runs_any"
	case len(l.statuses) > 0:
		query = "list_runs_status"
	}
	return query, []any{p.WorkspaceID, p.WorkflowName, l.statuses, p.Env, l.parent,
		l.staleBefore, l.createdAfter, p.DeadLettered, l.below.at, l.below.id, l.limit}, nil
}

// listing is a ListRunsParams as the list_runs queries take it.
type listing struct {
	none     bool     // no run can match
	statuses []string // distinct, sorted
	parent   any      // canonical id, or nil
	// staleBefore, createdAfter and below.at are rounded up to the
	// dialect's precision (zero: no bound).
	staleBefore, createdAfter time.Time
	below                     position
	limit                     int
}

// position is a place in the listing's order: the runs listed are those
// whose (created_at, id) is below (at, id); a zero at is the top.
type position struct {
	at time.Time
	id any // canonical id, or nil with a zero at
}

// before reports whether a lies below b in the listing's order.
func (a position) before(b position) bool {
	if !a.at.Equal(b.at) {
		return a.at.Before(b.at)
	}
	return a.id.(string) < b.id.(string) // canonical ids sort as uuids do
}

// newListing applies p's defaults and turns its instants into bounds that
// are exact on the stored values, which are whole multiples of prec: a
// stored time is before t exactly when it is before t rounded up to prec,
// and at or after t exactly when it is at or after that. A cursor whose
// time is finer than prec is therefore the position below every run of
// that rounded-up time (all of which are before it), and CreatedBefore
// is the position below every run created at it.
func newListing(p *state.ListRunsParams, prec time.Duration) (*listing, error) {
	l := &listing{limit: p.Limit, statuses: []string{}}
	if l.limit <= 0 {
		l.limit = ListRunsLimitDefault
	}
	for _, st := range p.Status {
		if !slices.Contains(l.statuses, string(st)) {
			l.statuses = append(l.statuses, string(st))
		}
	}
	slices.Sort(l.statuses)
	if !p.StaleBefore.IsZero() {
		// Only running runs are stale: the listing is of the running ones.
		if len(l.statuses) > 0 && !slices.Contains(l.statuses, string(starflowtype.RunRunning)) {
			l.none = true
		}
		l.statuses = []string{string(starflowtype.RunRunning)}
		l.staleBefore = roundUp(p.StaleBefore, prec)
	}
	if p.ParentRunID != "" {
		id, ok := CanonicalID(p.ParentRunID)
		if !ok {
			l.none = true // no run has such a parent
		}
		l.parent = id
	}
	if !p.CreatedAfter.IsZero() {
		l.createdAfter = roundUp(p.CreatedAfter, prec)
	}
	if c := p.After; c != nil {
		id, ok := CanonicalID(c.ID)
		if !ok || c.CreatedAt.IsZero() {
			return nil, starflowtype.Invalid(fmt.Errorf("cursor (%s, %q): want the created_at and id of a run", c.CreatedAt.Format(time.RFC3339Nano), c.ID))
		}
		l.below = position{at: c.CreatedAt.UTC(), id: id}
		if up := roundUp(c.CreatedAt, prec); !up.Equal(l.below.at) {
			l.below = position{at: up, id: minID}
		}
	}
	if !p.CreatedBefore.IsZero() {
		b := position{at: roundUp(p.CreatedBefore, prec), id: minID}
		if l.below.at.IsZero() || b.before(l.below) {
			l.below = b
		}
	}
	return l, nil
}

// roundUp is t (in UTC) rounded up to a whole multiple of prec.
func roundUp(t time.Time, prec time.Duration) time.Time {
	t = t.UTC()
	down := t.Truncate(prec)
	if down.Before(t) {
		return down.Add(prec)
	}
	return down
}

// FindRunIDsLimitDefault is FindRunIDsParams.Limit when it is not
// positive.
const FindRunIDsLimitDefault = 2

// FindRunIDs implements state.Operator: a range of the primary key, from
// the prefix padded with 0s to the prefix padded with fs.
func (s *Store) FindRunIDs(ctx context.Context, p *state.FindRunIDsParams) ([]string, error) {
	lo, hi, err := IDRange(p.Prefix)
	if err != nil {
		return nil, s.errorf("find run ids: %w", err)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = FindRunIDsLimitDefault
	}
	out, err := queryStrings(ctx, s.reader(), "find_run_ids", lo, hi, p.WorkspaceID, limit)
	if err != nil {
		return nil, s.errorf("find run ids: %w", err)
	}
	return out, nil
}

// IDRange returns the lowest and the highest canonical uuid that start
// with prefix: hex digits in either case, with or without the hyphens of
// the 8-4-4-4-12 layout (hyphens are ignored wherever they are). An empty
// prefix, one longer than a uuid, or one with another character is the
// caller's mistake (starflowtype.ErrInvalid).
func IDRange(prefix string) (lo, hi string, err error) {
	digits := make([]byte, 0, 32)
	for _, c := range prefix {
		switch {
		case c == '-':
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f':
			digits = append(digits, byte(c))
		case 'A' <= c && c <= 'F':
			digits = append(digits, byte(c-'A'+'a'))
		default:
			return "", "", starflowtype.Invalid(fmt.Errorf("run id prefix %q: %q is not a hex digit", prefix, c))
		}
	}
	switch {
	case len(digits) == 0:
		return "", "", starflowtype.Invalid(fmt.Errorf("run id prefix %q has no hex digit", prefix))
	case len(digits) > 32:
		return "", "", starflowtype.Invalid(fmt.Errorf("run id prefix %q is longer than a uuid", prefix))
	}
	pad := func(fill string) string {
		hex := string(digits) + strings.Repeat(fill, 32-len(digits))
		return hex[0:8] + "-" + hex[8:12] + "-" + hex[12:16] + "-" + hex[16:20] + "-" + hex[20:32]
	}
	return pad("0"), pad("f"), nil
}
