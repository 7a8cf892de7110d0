package storecore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/starflow/starflow/internal/faultpoint"
)

// Querier runs the dialect's named queries. Errors are translated: a unique
// violation wraps starflowtype.ErrConflict, and Row.Scan of no row is
// ErrNoRows.
type Querier interface {
	Exec(ctx context.Context, name string, args ...any) (int64, error)
	QueryRow(ctx context.Context, name string, args ...any) Row
	Query(ctx context.Context, name string, args ...any) (Rows, error)
}

// Tx is a write transaction running named queries, with the one savepoint
// the group committer keeps around each write of a shared transaction.
type Tx interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	Savepoint(ctx context.Context) error
	Release(ctx context.Context) error
	RollbackTo(ctx context.Context) error
	// Conn is the transaction as the dialect opened it.
	Conn() Conn
}

// named is Querier and Tx over a dialect's Conn: it looks the statement
// up, converts the arguments and destinations, and translates errors.
type named struct {
	c Conn
	d Dialect
	q map[string]string
}

func (s *Store) named(c Conn) *named { return &named{c: c, d: s.d, q: s.queries} }

func (n *named) text(name string) string {
	t, ok := n.q[name]
	if !ok {
		panic(fmt.Sprintf("storecore: dialect %s has no query %s", n.d.Name(), name))
	}
	return t
}

func (n *named) args(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case json.RawMessage:
			if v == nil {
				out[i] = nil
			} else {
				out[i] = string(v)
			}
		case time.Time:
			if v.IsZero() {
				out[i] = nil
			} else {
				out[i] = n.d.Arg(v.UTC())
			}
		default:
			out[i] = n.d.Arg(a)
		}
	}
	return out
}

// Each named query is the fault point "query:<name>"; an injected
// failure of QueryRow surfaces from Scan.

func (n *named) Exec(ctx context.Context, name string, args ...any) (int64, error) {
	if err := faultpoint.Check(ctx, "query:", name); err != nil {
		return 0, err
	}
	k, err := n.c.Exec(ctx, n.text(name), n.args(args)...)
	return k, n.d.Translate(err)
}

func (n *named) QueryRow(ctx context.Context, name string, args ...any) Row {
	if err := faultpoint.Check(ctx, "query:", name); err != nil {
		return row{d: n.d, err: err}
	}
	return row{r: n.c.QueryRow(ctx, n.text(name), n.args(args)...), d: n.d}
}

func (n *named) Query(ctx context.Context, name string, args ...any) (Rows, error) {
	if err := faultpoint.Check(ctx, "query:", name); err != nil {
		return nil, err
	}
	r, err := n.c.Query(ctx, n.text(name), n.args(args)...)
	if err != nil {
		return nil, n.d.Translate(err)
	}
	return rows{r, n.d}, nil
}

// Commit is the fault point "commit"; an injected failure rolls the
// transaction back, so nothing of it is committed.
func (n *named) Commit(ctx context.Context) error {
	if err := faultpoint.Check(ctx, "commit", ""); err != nil {
		_ = n.c.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return n.d.Translate(n.c.Commit(ctx))
}

func (n *named) Rollback(ctx context.Context) error { return n.c.Rollback(ctx) }
func (n *named) Conn() Conn                         { return n.c }

// The savepoint statements the group committer runs, the same in both
// dialects (a dialect may prepare them).
const (
	SavepointSQL  = "SAVEPOINT write"
	ReleaseSQL    = "RELEASE SAVEPOINT write"
	RollbackToSQL = "ROLLBACK TO SAVEPOINT write"
)

func (n *named) Savepoint(ctx context.Context) error { return n.raw(ctx, SavepointSQL) }
func (n *named) Release(ctx context.Context) error   { return n.raw(ctx, ReleaseSQL) }
func (n *named) RollbackTo(ctx context.Context) error {
	if err := n.raw(ctx, RollbackToSQL); err != nil {
		return err
	}
	return n.Release(ctx)
}

func (n *named) raw(ctx context.Context, sql string) error {
	_, err := n.c.Exec(ctx, sql)
	return n.d.Translate(err)
}

// row scans through holders: JSON into []byte, times through the
// dialect's TimeHolder. err is an injected failure Scan returns.
type row struct {
	r   Row
	d   Dialect
	err error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	conv, fix := holders(r.d, dest)
	if err := r.r.Scan(conv...); err != nil {
		return r.d.Translate(err)
	}
	fix()
	return nil
}

type rows struct {
	r Rows
	d Dialect
}

func (r rows) Next() bool { return r.r.Next() }
func (r rows) Err() error { return r.d.Translate(r.r.Err()) }
func (r rows) Close()     { r.r.Close() }
func (r rows) Scan(dest ...any) error {
	conv, fix := holders(r.d, dest)
	if err := r.r.Scan(conv...); err != nil {
		return r.d.Translate(err)
	}
	fix()
	return nil
}

// holders replaces the destinations a driver cannot fill directly and
// returns the function that fills them after the scan.
func holders(d Dialect, dest []any) ([]any, func()) {
	var fixes []func()
	out := make([]any, len(dest))
	for i, x := range dest {
		switch p := x.(type) {
		case *time.Time:
			h, get := d.TimeHolder()
			out[i] = h
			fixes = append(fixes, func() { *p = get() })
		case *json.RawMessage:
			out[i] = (*[]byte)(p)
		default:
			out[i] = x
		}
	}
	return out, func() {
		for _, f := range fixes {
			f()
		}
	}
}
