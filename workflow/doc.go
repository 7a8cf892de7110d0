// Package workflow is the definition format of SPEC §2: the model, parsing
// of YAML and JSON with line/column positions kept, validation whose errors
// name file:line:column, the canonical JSON form and its sha256 revision,
// and the JSON Schema published by `starflow schema`.
//
// Import rule: imports the standard library, starflowtype, internal/expr
// and the YAML library; never the engine or a store.
package workflow
