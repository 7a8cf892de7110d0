package workflow

import (
	"errors"
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
	for _, in := range []string{"", "d", "7", "7x", "-1d", "1d-2h", "7days", "1.5d", "d7", "1d1d"} {
		if _, err := ParseAge(in); err == nil || !strings.Contains(err.Error(), "write it like 7d") {
			t.Errorf("ParseAge(%q) = %v, want the error that says how to write an age", in, err)
		}
	}
	// Written right but too large: said so, with the bound (it was "write
	// it like 7d" for 99999999d).
	for _, in := range []string{"99999999d", "36501d", "36500d1h", "99999999999999999999999d", "9999999999h", "36500d2562047h"} {
		_, err := ParseAge(in)
		if !errors.Is(err, ErrDurationTooLarge) || err.Error() != `age "`+in+`" is too large: at most 36500d (100 years)` {
			t.Errorf("ParseAge(%q) = %v, want too large, at most 36500d", in, err)
		}
	}
	if got, err := ParseAge("36500d"); err != nil || got != AgeMax {
		t.Errorf("ParseAge(36500d) = %v, %v; want AgeMax", got, err)
	}
}

func TestParseDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"30s": 30 * time.Second, "1h30m": 90 * time.Minute, "0": 0, "-5s": -5 * time.Second, "2562047h": 2562047 * time.Hour} {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"99999999h", "2562048h", "9223372036854775808ns", "999999999999999999999s"} {
		_, err := ParseDuration(in)
		if !errors.Is(err, ErrDurationTooLarge) || err.Error() != "too large: at most 2562047h (about 292 years)" {
			t.Errorf("ParseDuration(%q) = %v, want too large", in, err)
		}
	}
	for _, in := range []string{"", "5x", "1d", "soon", "h", "1.2.3s"} {
		_, err := ParseDuration(in)
		if err == nil || errors.Is(err, ErrDurationTooLarge) || !strings.Contains(err.Error(), "write it like") {
			t.Errorf("ParseDuration(%q) = %v, want how to write one", in, err)
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
