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
// (a for_each loop's `as` name). Every evaluation runs under a CEL runtime cost limit
// and a wall-clock time limit; Compile rejects expressions whose static cost
// estimate already exceeds the limit.
//
// Values: JSON numbers without fraction or exponent are int64, others
// float64; maps are map[string]any, lists []any.
//
// Import rule: standard library and cel-go only.
package expr
