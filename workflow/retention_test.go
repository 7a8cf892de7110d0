package workflow

import (
	"strings"
	"testing"
	"time"
)

func TestParseAge(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"7d", 7 * 24 * time.Hour}, {"1d12h", 36 * time.Hour}, {"36h", 36 * time.Hour}, {"90m", 90 * time.Minute},
		{"0d", 0}, {"168h0m0s", 7 * 24 * time.Hour}, {" 2d ", 48 * time.Hour},
	} {
		if got, err := ParseAge(c.in); err != nil || got != c.want {
			t.Errorf("ParseAge(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, in := range []string{"", "d", "7", "7x", "-1d", "1d-2h", "7days", "1.5d", "d7", "1d1d", "99999999d"} {
		if _, err := ParseAge(in); err == nil || !strings.Contains(err.Error(), "write it like 7d") {
			t.Errorf("ParseAge(%q) = %v, want the error that says how to write an age", in, err)
		}
	}
}

func FuzzParseAge(f *testing.F) {
	for _, s := range []string{"7d", "1d12h", "36h", "", "-1d", "1d-2h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseAge(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseAge(%q) = %v, a negative age", s, d)
		}
	})
}

func TestRetentionField(t *testing.T) {
	t.Parallel()
	const head = "name: wf\nsteps:\n  - id: a\n    context_set: {x: 1}\n"
	def, err := Parse("wf.yaml", []byte(head+"retention: {succeeded: 1d, failed: 36h}\n"), ParseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if def.Retention == nil || time.Duration(def.Retention.Succeeded) != 24*time.Hour || time.Duration(def.Retention.Failed) != 36*time.Hour {
		t.Fatalf("retention = %+v", def.Retention)
	}
	canon := string(def.Canonical())
	if !strings.Contains(canon, `"retention":{"succeeded":"24h0m0s","failed":"36h0m0s"}`) {
		t.Errorf("canonical form %s lacks the retention in Go durations", canon)
	}
	again, err := Parse("wf.json", def.Canonical(), ParseOptions{Stored: true})
	if err != nil || string(again.Canonical()) != canon {
		t.Fatalf("the canonical form does not parse back to itself: %v", err)
	}
	plain, err := Parse("wf.yaml", []byte(head), ParseOptions{})
	if err != nil || strings.Contains(string(plain.Canonical()), "retention") {
		t.Fatalf("a definition without retention has it in its canonical form: %s, %v", plain.Canonical(), err)
	}
	for src, want := range map[string]string{
		"retention: {succeeded: 7x}\n":   `wf.yaml:5:24: retention.succeeded: invalid age "7x": write it like 7d, 1d12h, 36h or 90m`,
		"retention: {failed: 30s}\n":     "retention.failed must be at least 1m, not 30s",
		"retention: {}\n":                "retention must set succeeded or failed",
		"retention: {kept: 1d}\n":        `"kept"`,
		"retention: {succeeded: 3}\n":    "retention.succeeded",
		"retention: 7d\n":                "retention",
		"retention: {interrupted: 1d}\n": `"interrupted"`,
	} {
		_, err := Parse("wf.yaml", []byte(head+src), ParseOptions{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one containing %q", src, err, want)
		}
	}
	sch := compileSchema(t)
	if err := sch.Validate(document(t, head+"retention: {succeeded: 1d12h, failed: 90m}\n")); err != nil {
		t.Errorf("the schema refuses a valid retention: %v", err)
	}
	for _, bad := range []string{"retention: {succeeded: 7x}\n", "retention: {}\n", "retention: {kept: 1d}\n"} {
		if err := sch.Validate(document(t, head+bad)); err == nil {
			t.Errorf("the schema accepts %q", bad)
		}
	}
}
