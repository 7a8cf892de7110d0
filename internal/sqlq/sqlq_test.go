package sqlq

import "testing"

func TestParse(t *testing.T) {
	q, err := Parse("-- header\n-- name: a\nSELECT 1;\n-- name: b\n-- doc\nSELECT 2\n  FROM t;\n")
	if err != nil {
		t.Fatal(err)
	}
	if q["a"] != "SELECT 1;" || q["b"] != "-- doc\nSELECT 2\n  FROM t;" || len(q) != 2 {
		t.Fatalf("got %#v", q)
	}
	if _, err := Parse("-- name: a\nx\n-- name: a\ny"); err == nil {
		t.Fatal("duplicate name accepted")
	}
	if _, err := Parse("-- name:   \nx"); err == nil {
		t.Fatal("empty name accepted")
	}
}
