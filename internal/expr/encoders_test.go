package expr

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// TestEncodersRoundTrip: what json.encode and yaml.encode write, json.parse
// and yaml.parse read back as the same value, ints as ints.
func TestEncodersRoundTrip(t *testing.T) {
	t.Parallel()
	e := Default()
	values := []any{
		nil, true, int64(0), int64(-42), int64(1<<53 - 1), 2.5, -0.125, 1e300, "",
		"plain", "yes", "null", "1", "a: b", "- x", "#", "multi\nline\n", `quote " and \ backslash`,
		"tab\tand <html> & unicode é 😀",
		[]any{}, map[string]any{},
		[]any{int64(1), "two", 3.5, false, nil, []any{[]any{}}},
		map[string]any{
			"name": "Ada", "n": int64(7), "ratio": 0.5, "ok": true, "none": nil,
			"tags": []any{"a", "b"}, "nested": map[string]any{"deep": map[string]any{"x": []any{int64(1), map[string]any{}}}},
			"with space": "v", "": "empty key", "1": "digit key",
		},
	}
	for _, lang := range []string{"json", "yaml"} {
		p, err := e.Compile(lang + ".parse(" + lang + ".encode(input.v)).value()")
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			got, err := e.Eval(context.Background(), p, map[string]any{"input": map[string]any{"v": v}})
			if err != nil || !reflect.DeepEqual(got, v) {
				t.Errorf("%s round trip of %#v = %#v, %v", lang, v, got, err)
			}
		}
	}
}

// TestJSONEncodeWritesKeysInOrder: cel-go writes a map's keys in Go's random
// iteration order; the engine's json.encode gives one text.
func TestJSONEncodeWritesKeysInOrder(t *testing.T) {
	t.Parallel()
	e := Default()
	m := map[string]any{}
	for _, k := range strings.Split("q w e r t y u i o p a s d f g h j k l z", " ") {
		m[k] = map[string]any{"b": int64(1), "a": k}
	}
	const want = `{"a":{"a":"a","b":1},"d":{"a":"d","b":1}`
	for _, src := range []string{"json.encode(input)", "json.encode({'z': 1, 'y': 2, 'x': 3, 'w': 4, 'v': input})", "json.encode({2: 'b', 1: 'a', '1': 'c', true: 'd'})"} {
		p, err := e.Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		first := ""
		for i := range 20 {
			got, err := e.Eval(context.Background(), p, map[string]any{"input": m})
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				first = got.(string)
				t.Logf("%s = %.80s…", src, first)
			} else if got != first {
				t.Fatalf("%s gave %q, then %q", src, first, got)
			}
		}
		if src == "json.encode(input)" && !strings.HasPrefix(first, want) {
			t.Errorf("%s = %q, want it to start %q", src, first, want)
		}
		if strings.HasPrefix(src, "json.encode({2:") && first != `{"1":"a","1":"c","2":"b","true":"d"}` {
			t.Errorf("%s = %q", src, first)
		}
	}
}

// TestJSONParseGivesStorableValues: what json.parse gives is made of the
// plain values the engine stores, a number without fraction or exponent an
// int when it fits one.
func TestJSONParseGivesStorableValues(t *testing.T) {
	t.Parallel()
	e := Default()
	p, err := e.Compile(`json.parse('{"i": 1, "neg": -3, "d": 1.5, "e": 1e3, "big": 12345678901234567890, "s": "x", "b": true, "n": null, "l": [1, [2]], "m": {"k": {}}}')`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Eval(context.Background(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"i": int64(1), "neg": int64(-3), "d": 1.5, "e": 1000.0, "big": 12345678901234567890.0, "s": "x", "b": true, "n": nil,
		"l": []any{int64(1), []any{int64(2)}}, "m": map[string]any{"k": map[string]any{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
}

// TestParsersStopAtDepth: text nested deeper than 10,000 levels gives
// none, and 10,000 levels a value.
func TestParsersStopAtDepth(t *testing.T) {
	t.Parallel()
	e := Default()
	for _, lang := range []string{"json", "yaml"} {
		p, err := e.Compile(lang + ".parse(input).hasValue()")
		if err != nil {
			t.Fatal(err)
		}
		for depth, want := range map[int]bool{10_000: true, 10_001: false} {
			doc := strings.Repeat("[", depth) + strings.Repeat("]", depth)
			if got, err := e.Eval(context.Background(), p, map[string]any{"input": doc}); err != nil || got != want {
				t.Errorf("%s.parse of %d levels: %v, %v; want %v", lang, depth, got, err, want)
			}
		}
	}
}

// hugeEncoderInputs are inputs one call of an encoder on which would run far
// beyond the default limit.
func hugeEncoderInputs() map[string]any {
	ints := make([]any, 1_000_000)
	for i := range ints {
		ints[i] = int64(i)
	}
	var deep any = int64(1)
	for range 3000 {
		deep = map[string]any{"a": deep}
	}
	return map[string]any{
		"s10m":   strings.Repeat("a", 10<<20),
		"ints":   ints,
		"deep":   deep,
		"json5m": "[" + strings.Repeat("1,", 5<<20) + "1]",
		"yaml1m": strings.Repeat("- 1\n", 250_000),
	}
}

// TestEncodersRefuseHugeInputs: a call priced over the limit fails with the
// cost-limit error, refused before it runs.
func TestEncodersRefuseHugeInputs(t *testing.T) {
	t.Parallel()
	e := Default()
	in := hugeEncoderInputs()
	vars := map[string]any{"input": in}
	for _, c := range []struct {
		src, arg string
		overload string
	}{
		{"json.encode(input.s10m)", "s10m", "json_encode_dyn"},
		{"json.encode(input.ints)", "ints", "json_encode_dyn"},
		{"yaml.encode(input.s10m)", "s10m", "yaml_encode_dyn"},
		{"yaml.encode(input.ints)", "ints", "yaml_encode_dyn"},
		{"yaml.encode(input.deep)", "deep", "yaml_encode_dyn"}, // 3,000 levels: 72 MB of YAML
		{"json.parse(input.s10m)", "s10m", "json_parse_string"},
		{"json.parse(input.json5m)", "json5m", "json_parse_string"},
		{"json.parse(input.json5m, list)", "json5m", "json_parse_string_type"},
		{"yaml.parse(input.s10m)", "s10m", "yaml_parse_string"},
		{"yaml.parse(input.yaml1m)", "yaml1m", "yaml_parse_string"},
		{"yaml.parse(input.yaml1m, list)", "yaml1m", "yaml_parse_string_type"},
		{"json.encode(input.ints) == '' || true", "ints", "json_encode_dyn"},
	} {
		t.Run(c.src, func(t *testing.T) {
			t.Parallel()
			p, err := e.Compile(c.src)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = e.Eval(context.Background(), p, vars)
			t.Logf("refused in %s", time.Since(start))
			if err == nil || !strings.Contains(err.Error(), "exceeded its cost limit of 1000000") {
				t.Fatalf("want the cost-limit error, got %v", err)
			}
			// The refusal comes from the guard, before the call's work (the
			// charge after it would fail the evaluation too).
			args := []ref.Val{types.DefaultTypeAdapter.NativeToValue(in[c.arg])}
			if strings.HasSuffix(c.overload, "_type") {
				args = append(args, types.ListType)
			}
			var r *refusal
			if got := callOverload(t, e, c.overload, args); !errors.As(got.(*types.Err), &r) {
				t.Fatalf("%s gives %v, want a refusal", c.overload, got)
			}
		})
	}
}

// callOverload calls the function e binds for the overload id.
func callOverload(t *testing.T, e *Env, id string, args []ref.Val) ref.Val {
	t.Helper()
	for _, fn := range e.env.Functions() {
		impls, err := fn.Bindings()
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range impls {
			if b.Operator != id {
				continue
			}
			switch {
			case len(args) == 1 && b.Unary != nil:
				return b.Unary(args[0])
			case len(args) == 2 && b.Binary != nil:
				return b.Binary(args[0], args[1])
			}
			return b.Function(args...)
		}
	}
	t.Fatalf("no binding of %s", id)
	return nil
}

// TestYAMLParseRefusesHostileDocuments: a document whose aliases stand for
// a huge value is refused before it is expanded, one nested too deep or
// holding itself gives none, and neither takes much memory. Not parallel,
// so that the memory it allocates can be measured. The evaluation's
// wall-clock limit is raised: it is the cost limit that must refuse these
// documents (under -race on a loaded machine the 40 kB one took over the
// default 100 ms and failed with the timeout instead).
func TestYAMLParseRefusesHostileDocuments(t *testing.T) {
	laughs := "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" // nine levels of nine: 9^9 strings
	prev := "a"
	for _, n := range strings.Split("b c d e f g h i", " ") {
		laughs += n + ": &" + n + " [" + strings.Repeat("*"+prev+", ", 8) + "*" + prev + "]\n"
		prev = n
	}
	e, err := NewEnv(Limits{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, doc string
		want      any // nil: null; "cost": the cost-limit error
	}{
		{"billion laughs", laughs, "cost"},
		{"billion laughs of maps", mapLaughs(), "cost"},
		{"a long string repeated", "a: &a " + strings.Repeat("x", 40_000) + "\nb: [" + strings.Repeat("*a, ", 900) + "*a]\n", "cost"},
		{"a chain of anchors", chainOfAnchors(40), "cost"},
		{"an anchor holding itself", "a: &a [1, *a]\n", nil},
		{"nested deeper than the parser allows", strings.Repeat("[", 10_001) + strings.Repeat("]", 10_001), nil},
		{"an alias before its anchor", "a: *b\nb: &b 1\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := e.Compile("yaml.parse(input.doc)")
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			got, err := e.Eval(context.Background(), p, map[string]any{"input": map[string]any{"doc": c.doc}})
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d bytes of YAML: %s, %d MB allocated", len(c.doc), took, allocated>>20)
			if c.want == "cost" {
				if err == nil || !strings.Contains(err.Error(), "exceeded its cost limit of 1000000") {
					t.Fatalf("want the cost-limit error, got %v, %v", got, err)
				}
			} else if err != nil || got != c.want {
				t.Fatalf("got %v, %v; want %v", got, err, c.want)
			}
			// Expanded, the billion laughs would take gigabytes.
			if allocated > 256<<20 {
				t.Errorf("allocated %d MB", allocated>>20)
			}
		})
	}
}

// mapLaughs is the billion laughs with maps for lists, merged (`<<`) at the
// last level.
func mapLaughs() string {
	var b strings.Builder
	b.WriteString("l0: &l0 {k0: lol, k1: lol, k2: lol, k3: lol, k4: lol, k5: lol, k6: lol, k7: lol, k8: lol}\n")
	for i := 1; i < 9; i++ {
		p := "*l" + strconv.Itoa(i-1)
		b.WriteString("l" + strconv.Itoa(i) + ": &l" + strconv.Itoa(i) + " {")
		for k := range 9 {
			b.WriteString("k" + strconv.Itoa(k) + ": " + p + ", ")
		}
		b.WriteString("}\n")
	}
	b.WriteString("top:\n  <<: *l8\n")
	return b.String()
}

// chainOfAnchors is a document of n anchors, each a list of two aliases of
// the one before: 2^n values.
func chainOfAnchors(n int) string {
	var b strings.Builder
	b.WriteString("a0: &a0 [x]\n")
	for i := 1; i < n; i++ {
		p := "*a" + strconv.Itoa(i-1)
		b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " [" + p + ", " + p + "]\n")
	}
	return b.String()
}

// TestEncodersAreChargedTheirPrice: at run time each call is charged its
// price (docs/expressions.md, Encoders), which its static estimate
// bounds.
func TestEncodersAreChargedTheirPrice(t *testing.T) {
	t.Parallel()
	e := Default()
	vars := map[string]any{"input": map[string]any{
		"v":    map[string]any{"ab": []any{int64(1), "xyz"}}, // a map, a key of 2 bytes, a list, an int, a string of 3 bytes
		"json": `{"ab": [1, "xyz"]}`,
		"yaml": "ab: [1, xyz]",
	}}
	for _, c := range []struct {
		src  string
		want uint64 // the charge of the call alone
	}{
		// The call; 5 each for the map, the key, the list, the int and the
		// string, and 1 for every 2 bytes of each string, rounded up.
		{"json.encode(input.v)", 1 + 5 + (5 + 1) + 5 + 5 + (5 + 2)},
		// The call; 30 for each value and 2 for each byte, times 1 + d/10
		// (rounded down) at depth d: the map (0), the key and the list (1),
		// the int and the string (2).
		{"yaml.encode(input.v)", 1 + 30 + (34 + 3) + (30 + 3) + (30 + 6) + (36 + 7)},
		{"json.parse(input.json)", 1 + 18},
		{"json.parse(input.json, map)", 1 + 18},
		// 10 for each of the 12 bytes, and for the result 10 for each
		// value (5) and 1 for each byte of its strings (2 + 3).
		{"yaml.parse(input.yaml)", 1 + 120 + 50 + 5},
		{"yaml.parse(input.yaml, map)", 1 + 120 + 50 + 5},
	} {
		arg := c.src[strings.Index(c.src, "(")+1 : strings.IndexAny(c.src, ",)")]
		if got := actualCost(t, e, c.src, vars) - actualCost(t, e, arg, vars); got != c.want {
			t.Errorf("%s is charged %d, want %d", c.src, got, c.want)
		}
	}
	// A literal's estimate bounds the charge.
	for _, src := range []string{
		"json.encode({'ab': [1, 'xyz']})", "yaml.encode({'ab': [1, 'xyz']})", "json.encode(['é', b'x', 2.5, true, null])",
		`json.parse('{"ab": [1, "xyz"]}')`, "yaml.parse('ab: [1, xyz]')", "yaml.parse('ab: [1, xyz]', map)",
	} {
		ast, iss := e.env.Compile(src)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		est, err := e.env.EstimateCost(ast, zeroEstimator{})
		if err != nil {
			t.Fatal(err)
		}
		if got := actualCost(t, e, src, vars); got < est.Min || got > est.Max {
			t.Errorf("%s costs %d, estimated %d to %d", src, got, est.Min, est.Max)
		}
	}
}

// actualCost is what an evaluation of src is charged, its constants not
// folded.
func actualCost(t *testing.T, e *Env, src string, vars map[string]any) uint64 {
	t.Helper()
	ast, iss := e.env.Compile(src)
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	p, err := e.env.Program(ast, cel.CostLimit(e.limits.Cost), cel.EvalOptions(cel.OptTrackCost))
	if err != nil {
		t.Fatal(err)
	}
	act := map[string]any{}
	for _, n := range e.names {
		act[n] = vars[n]
	}
	_, det, err := p.Eval(act)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	return *det.ActualCost()
}

// TestEncoderEstimatesAreFinite: validation takes the JSON and YAML
// functions of values known only at run time; their estimates are finite,
// at most the limit plus one for each call.
func TestEncoderEstimatesAreFinite(t *testing.T) {
	t.Parallel()
	e := Default()
	for _, src := range []string{"json.encode(input)", "yaml.encode(input)", "json.parse(input.s)", "json.parse(input.s, map)", "yaml.parse(input.s)", "yaml.parse(input.s, list)"} {
		if _, err := e.Compile(src); err != nil {
			t.Errorf("%s: %v", src, err)
		}
		ast, _ := e.env.Compile(src)
		est, err := e.env.EstimateCost(ast, zeroEstimator{})
		if err != nil {
			t.Fatal(err)
		}
		if est.Max > e.limits.Cost+10 {
			t.Errorf("%s is estimated %d to %d", src, est.Min, est.Max)
		}
	}
}

// TestEncodersFollowTheLimit: the prices are held against the
// environment's own limit.
func TestEncodersFollowTheLimit(t *testing.T) {
	t.Parallel()
	e, err := NewEnv(Limits{Cost: 1000})
	if err != nil {
		t.Fatal(err)
	}
	l := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = int64(i)
		}
		return out
	}
	for _, c := range []struct {
		src   string
		input any
		ok    bool
	}{
		{"size(json.encode(input))", l(150), true},  // 1 + 5 × 151
		{"size(json.encode(input))", l(250), false}, // 1 + 5 × 251
		{"size(yaml.encode(input))", l(25), true},   // 1 + 30 + 25 × 33
		{"size(yaml.encode(input))", l(35), false},  // 1 + 30 + 35 × 33
		{"json.parse(input).hasValue()", strings.Repeat(" ", 900) + "1", true},
		{"json.parse(input).hasValue()", strings.Repeat(" ", 1100) + "1", false},
		{"yaml.parse(input).hasValue()", strings.Repeat(" ", 80) + "1", true},
		{"yaml.parse(input).hasValue()", strings.Repeat(" ", 120) + "1", false},
	} {
		p, err := e.Compile(c.src)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.Eval(context.Background(), p, map[string]any{"input": c.input})
		if c.ok && err != nil {
			t.Errorf("%s: %v", c.src, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), "exceeded its cost limit of 1000")) {
			t.Errorf("%s: want the cost-limit error, got %v", c.src, err)
		}
	}
}
