package redact

import (
	"reflect"
	"testing"
)

// TestValueCopyOnWrite: Value leaves its argument unchanged, returns the
// very same list or map when nothing in it needs scrubbing (a large step
// output is not duplicated to be stored), and copies only the containers
// on the path to what it scrubs.
func TestValueCopyOnWrite(t *testing.T) {
	t.Parallel()
	r := New("s3cr3t-value")
	clean := map[string]any{"a": []any{int64(1), "x", map[string]any{"b": 2.5}}, "c": nil}
	if got := r.Value(clean); reflect.ValueOf(got).Pointer() != reflect.ValueOf(clean).Pointer() {
		t.Fatal("a value with nothing to scrub was copied")
	}
	untouched := map[string]any{"k": "v"}
	in := map[string]any{
		"list":             []any{"ok", map[string]any{"tok": "Bearer s3cr3t-value"}, untouched},
		"other":            untouched,
		"s3cr3t-value key": true,
	}
	got := r.Value(in).(map[string]any)
	want := map[string]any{
		"list":    []any{"ok", map[string]any{"tok": "Bearer ***"}, untouched},
		"other":   untouched,
		"*** key": true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v\nwant %#v", got, want)
	}
	if in["list"].([]any)[1].(map[string]any)["tok"] != "Bearer s3cr3t-value" || in["s3cr3t-value key"] != true {
		t.Fatal("the argument was changed")
	}
	if reflect.ValueOf(got["other"]).Pointer() != reflect.ValueOf(untouched).Pointer() {
		t.Fatal("a clean branch was copied")
	}
}
