// Package workflow is the definition format of SPEC §2: the model, parsing
// of YAML and JSON with line/column positions kept, validation whose errors
// name file:line:column, the canonical JSON form and its sha256 revision,
// the JSON Schema published by `starflow schema`, and the check of a run
// input against a definition's input_schema.
//
// Steps are service_call, context_set, fail, custom types registered from
// Go, and the control-flow constructs if, try, repeat_until, for_each and
// parallel, which hold nested steps lists. Step ids are unique in the whole
// definition; run_after resolves within one steps list, each list being a
// graph of its own. Step.Children, Definition.Walk, StepByID, Ancestors and
// DependsOn navigate the tree. Defaults of the constructs (as: item,
// concurrency: 1, fail_fast: true) are filled in by Parse and always
// written in the canonical form, so spelling them out does not change a
// revision.
//
// Limits caps a definition (source size, nesting of constructs, for_each
// concurrency, max_iterations: checked by Parse, ParseOptions.Limits), a
// run input, a wake payload and a for_each's items (checked by the
// engine); an over-cap error is a *LimitError naming the cap and how to
// raise it. Parse also refuses expressions that read a name the engine
// can never give them where they are evaluated (scope.go): a steps.<id>
// not yet run, nested elsewhere or unknown; item outside a for_each;
// error outside a catch; output outside a step's own output.
//
// Parse reads JSON through the YAML parser (after rewriting the few JSON
// escapes YAML lacks), so both formats give positions. It reports every
// problem it finds as an *Errors sorted by position; expression errors
// wrap the *expr.SyntaxError (errors.Is(err, expr.ErrTooCostly) tells a
// cost-limit rejection).
//
// Import rule: imports the standard library, internal/expr, the YAML
// library (go.yaml.in/yaml/v3) and the JSON Schema library
// (santhosh-tekuri/jsonschema/v6, with golang.org/x/text for its
// messages); never the engine or a store.
package workflow
