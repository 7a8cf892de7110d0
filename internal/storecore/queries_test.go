package storecore_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/starflow/starflow/state/pgstore"
	"github.com/starflow/starflow/state/sqlitestore"
)

// queryArg is, for each function or method of the core that takes a query
// name, the index of that argument.
var queryArg = map[string]int{
	"Exec": 1, "QueryRow": 1, "Query": 1, // Querier, Tx
	"strings": 1, "mustAffect": 1, "removedVars": 1, "cancelWaits": 1, "drainLease": 1, "definitions": 1, "gcDelete": 1,
	"queryStrings": 2, "listSteps": 2, "runWithEvent": 1, "queryWaits": 2, "queryAll": 2, "fenced": 2,
	"step": 0, // execStepStatements' closure
}

// pgOnly are PostgreSQL's one-statement forms of two core queries: the
// claims that start their runs (ClaimRuns runs the claim's name + "_start"
// where it exists) and the run writes that append their event
// (runWithEvent: name + "_event").
var pgOnly = map[string]string{"claim_run_start": "claim_run", "claim_run_id_start": "claim_run_id",
	"claim_run_family_start": "claim_run_family", "insert_run_event": "insert_run", "run_succeeded_event": "run_succeeded"}

// TestQueriesExist: every query the core names is defined by both
// dialects, and the dialects define the same queries (but PostgreSQL's
// one-statement step writes, sw_*), none of them unused.
func TestQueriesExist(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if as, ok := n.(*ast.AssignStmt); ok {
				// query, args := "claim_run", …; query = "…"
				if id, ok := as.Lhs[0].(*ast.Ident); ok && id.Name == "query" {
					if lit, ok := as.Rhs[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						q, _ := strconv.Unquote(lit.Value)
						used[q] = fset.Position(lit.Pos()).String()
					}
				}
				return true
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var fn string
			switch e := call.Fun.(type) {
			case *ast.SelectorExpr:
				fn = e.Sel.Name
			case *ast.Ident:
				fn = e.Name
			}
			i, ok := queryArg[fn]
			if !ok || i >= len(call.Args) {
				return true
			}
			if lit, ok := call.Args[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				q, _ := strconv.Unquote(lit.Value)
				used[q] = fset.Position(lit.Pos()).String()
			}
			return true
		})
	}
	if len(used) < 50 {
		t.Fatalf("found %d query names in the core; the scan is broken", len(used))
	}
	pg := map[string]bool{}
	for name := range pgstore.Queries {
		if !strings.HasPrefix(name, "sw_") && pgOnly[name] == "" {
			pg[name] = true
		}
	}
	lite := map[string]bool{}
	for name := range sqlitestore.Queries {
		lite[name] = true
	}
	for q, at := range used {
		if !pg[q] {
			t.Errorf("%s: query %q is not in state/pgstore/queries.sql", at, q)
		}
		if !lite[q] {
			t.Errorf("%s: query %q is not in state/sqlitestore/queries.sql", at, q)
		}
	}
	for _, d := range []struct {
		name string
		qs   map[string]bool
	}{{"pgstore", pg}, {"sqlitestore", lite}} {
		for _, q := range slices.Sorted(maps.Keys(d.qs)) {
			if _, ok := used[q]; !ok {
				t.Errorf("%s defines query %q, which the core never runs", d.name, q)
			}
		}
	}
	for name, base := range pgOnly {
		if _, ok := pgstore.Queries[name]; !ok {
			t.Errorf("pgstore has no %q, the one-statement form of %q", name, base)
		}
	}
	for _, op := range []string{"sw_start", "sw_start_succeed", "sw_retry", "sw_succeed", "sw_fail", "sw_skip"} {
		for _, v := range []string{op, op + "_run"} {
			if _, ok := pgstore.Queries[v]; !ok {
				t.Errorf("pgstore has no step write %q", v)
			}
		}
	}
}
