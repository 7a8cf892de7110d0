package redact

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

const horse = "correct-horse/battery-staple-42"

// jsonEscapeAll writes every character of s as \uXXXX (surrogate pairs
// above the BMP).
func jsonEscapeAll(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r > 0xffff {
			r1, r2 := utf16Pair(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			continue
		}
		fmt.Fprintf(&b, `\u%04x`, r)
	}
	return b.String()
}

func utf16Pair(r rune) (rune, rune) {
	r -= 0x10000
	return 0xd800 + (r>>10)&0x3ff, 0xdc00 + r&0x3ff
}

func percentEscapeAll(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

// fullyDecoded is s with every view decoded, as a reader (or a second
// program) could decode it.
func fullyDecoded(s string) string {
	for _, d := range views {
		s, _ = d.decode(s)
	}
	return s
}

// fragments reports the substrings of secret of 8+ bytes found in s.
func fragments(s, secret string) []string {
	var out []string
	for i := 0; i+8 <= len(secret); i++ {
		if f := secret[i : i+8]; strings.Contains(s, f) {
			out = append(out, f)
		}
	}
	return out
}

func TestEscapedForms(t *testing.T) {
	t.Parallel()
	r := New(horse)
	cases := []struct{ name, in, want string }{
		{"all escaped", `{"echo":"` + jsonEscapeAll(horse) + `","keep":"x"}`, `{"echo":"***","keep":"x"}`},
		{"first character escaped", `x\u0063orrect-horse/battery-staple-42y`, `x***y`},
		{"upper-case hex", `x\u0063\u006Frrect-horse/battery-staple-42y`, `x***y`},
		{"escaped slash", `"correct-horse\/battery-staple-42"`, `"***"`},
		{"escaped last", `correct-horse/battery-staple-4\u0032!`, `***!`},
		{"escaped twice", `{"a":"{\"echo\":\"\\u0063orrect-horse/battery-staple-42\"}"}`, `{"a":"{\"echo\":\"***\"}"}`},
		{"percent mixed", `q=c%6Frrect-horse%2Fbattery-staple-42&r=1`, `q=***&r=1`},
		{"percent all", `q=` + percentEscapeAll(horse), `q=***`},
		{"percent inside json", `"c\u00256Frrect-horse/battery-staple-42"`, `"***"`},
		{"json inside percent", `c%5Cu006Frrect-horse/battery-staple-42`, `***`},
		{"twice in a row", jsonEscapeAll(horse) + `c\u006frrect-horse/battery-staple-42`, `***`},
		{"base64 escaped", `b=` + `\u0059` + base64.StdEncoding.EncodeToString([]byte(horse))[1:], `b=***`},
		{"innocent escapes", `a\nb %41 \u0041 \\ 100% \u12`, `a\nb %41 \u0041 \\ 100% \u12`},
		{"trailing backslash", `tail\`, `tail\`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := r.String(c.in)
			if got != c.want {
				t.Fatalf("String(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
			if f := fragments(fullyDecoded(got), horse); len(f) > 0 {
				t.Fatalf("decoded output %q keeps fragments %v", fullyDecoded(got), f)
			}
		})
	}
}

func TestEscapedSurrogates(t *testing.T) {
	t.Parallel()
	secret := "pässwörd-😀-a-long-secret-value"
	r := New(secret)
	in := `{"e":"` + jsonEscapeAll(secret) + `","f":"p\u00e4sswörd-\ud83d\ude00-a-long-secret-value"}`
	if got, want := r.String(in), `{"e":"***","f":"***"}`; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
	// A lone surrogate is no secret and is left alone.
	if got := r.String(`\ud83d-x`); got != `\ud83d-x` {
		t.Fatalf("lone surrogate: %q", got)
	}
}

func TestValueScrubsEscapedStrings(t *testing.T) {
	t.Parallel()
	r := New(horse)
	v := r.Value(map[string]any{"body": `{"echo":"` + jsonEscapeAll(horse) + `"}`, "h": []any{"c%6Frrect-horse%2Fbattery-staple-42"}})
	m := v.(map[string]any)
	if m["body"] != `{"echo":"***"}` || m["h"].([]any)[0] != "***" {
		t.Fatalf("%#v", m)
	}
}

// escapeSome escapes a random choice of s's bytes/characters, JSON or
// percent style, and sometimes escapes the result again.
func escapeSome(rng *rand.Rand, s string) string {
	var b strings.Builder
	for _, c := range s {
		switch rng.IntN(4) {
		case 0:
			if c > 0xffff {
				r1, r2 := utf16Pair(c)
				fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(&b, `\u%04x`, c)
			}
		case 1:
			var buf [4]byte
			n := utf8.EncodeRune(buf[:], c)
			for _, x := range buf[:n] {
				fmt.Fprintf(&b, "%%%02x", x)
			}
		default:
			b.WriteRune(c)
		}
	}
	out := b.String()
	if rng.IntN(4) == 0 { // escaped again, as a JSON string inside JSON
		out = strings.ReplaceAll(out, `\`, `\\`)
	}
	return out
}

// FuzzEscapedSecret: whatever surrounds it and however its characters are
// escaped (one JSON or percent layer per character, maybe a second JSON
// layer over the whole), the output's decoded views hold no 8-byte
// fragment of the secret, and text without the secret is returned
// unchanged.
func FuzzEscapedSecret(f *testing.F) {
	f.Add("before ", " after", uint64(1))
	f.Add(`{"k":"`, `"}`, uint64(7))
	f.Add(`\`, `%`, uint64(42))
	f.Add(`\\u`, `%2`, uint64(99))
	f.Fuzz(func(t *testing.T, pre, post string, seed uint64) {
		if strings.Contains(pre+post, "horse") || strings.Contains(fullyDecoded(pre+post), "horse") {
			return
		}
		r := New(horse)
		if got := r.String(pre + post); got != pre+post {
			t.Fatalf("text without the secret changed: %q → %q", pre+post, got)
		}
		if tail := pre[max(0, len(pre)-5):]; strings.ContainsAny(tail, `\%`) {
			// An unfinished escape before the secret takes its first
			// character in (`%0` + "c…", `\u006` + "c…"), or a backslash
			// escapes its first escape once more: another text than an
			// escaped secret (see the package doc).
			return
		}
		rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		in := pre + escapeSome(rng, horse) + post
		got := r.String(in)
		if f := fragments(fullyDecoded(got), horse); len(f) > 0 {
			t.Fatalf("String(%q) = %q keeps fragments %v", in, got, f)
		}
	})
}

// BenchmarkStringEscapedBody: a 1 MiB JSON body full of escapes, without
// the secret (the common case) and with it.
func BenchmarkStringEscapedBody(b *testing.B) {
	r := New(horse)
	body := strings.Repeat(`{"k":"line\nwith \"quotes\" and \u00e9 and 50%25"},`, 1<<20/52)
	for _, c := range []struct{ name, s string }{{"clean", body}, {"echo", body + jsonEscapeAll(horse)}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.s)))
			for b.Loop() {
				r.String(c.s)
			}
		})
	}
}
