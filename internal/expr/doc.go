// Package expr evaluates Starflow expressions: CEL (cel.dev/cel-go) inside
// `${{ … }}` (SPEC §2).
//
// A template is any JSON-like value (string, number, bool, null, list,
// map). A string that is exactly one `${{ expr }}` — nothing else, not even
// spaces — evaluates to the expression's typed value; any other string with
// expressions is interpolated into a string, non-string values rendered as
// JSON. Lists and maps are templated element by element.
//
// Names in scope: input, variables, steps, item, error, env, secrets, run,
// output (see Names); Env.With derives an environment that declares more
// (a for_each loop's `as` and index names, a repeat_until's iteration).
//
// Functions: CEL's standard definitions and cel-go's strings, math, lists,
// sets, encoders (base64, json, yaml), bindings (cel.bind),
// two-variable comprehensions and optional types libraries, each pinned to
// a version (libraries in expr.go), so that upgrading cel-go does not
// change them unasked under stored definitions. docs/expressions.md lists
// every function with an example; docs_test.go evaluates each example and
// fails when the environment declares a function the document lacks.
//
// Limits: every evaluation runs under a CEL runtime cost limit and a
// wall-clock time limit; Compile rejects expressions whose static cost
// estimate already exceeds the limit. cel-go charges a function after it
// returns, so the functions whose work outgrows their arguments (set
// comparisons, distinct, indexOf, replace, join) are priced before they
// run and refused at once when that alone exceeds the limit (guards.go).
// The JSON and YAML functions, which cel-go charges the largest possible
// cost, are priced so too, and charged, by the size of their value or
// text (encoders.go); json.encode writes map keys in order.
//
// Values: JSON numbers without fraction or exponent are int64, others
// float64; maps are map[string]any, lists []any.
//
// Import rule: standard library, cel-go, and go.yaml.in/yaml/v3 (the
// YAML parser of cel-go's yaml.parse, to count a document's aliases).
package expr
