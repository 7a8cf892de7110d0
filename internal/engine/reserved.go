package engine

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/starflow/starflow/internal/jsonvalue"
	"github.com/starflow/starflow/step"
)

// Engine internals are named with reservedPrefix (SPEC §2): variables
// (__celestialWait, …) and the placeholder of a checkpoint value stored in
// workflow_blobs (__celestialBlob). A step's output or context changes
// holding such a key anywhere — from a hostile service's response body, a
// custom step, a wake payload, a pass or context_set expression — could be
// mistaken for the engine's own data by a reader that trusts shapes, so
// the step fails instead, permanently (issue 10 item 3). Stores mark blob
// references out of band as well; this refusal is the second wall.

// checkReserved refuses the JSON document b (what is about to be stored as
// what, "output" or "context") when an object key anywhere in it starts
// with reservedPrefix. The error (unencodable, permanent) names the key
// and where it is, e.g. `output holds the reserved key "__celestialBlob"
// at body.data[2]`.
func checkReserved(what string, b []byte) error {
	// Encoded by encoding/json, a key is written as its own characters
	// (no \u escape for '_' or letters): a document without the prefix's
	// bytes holds no such key.
	if !bytes.Contains(b, []byte(reservedPrefix)) {
		return nil
	}
	v, err := jsonvalue.Decode(b)
	if err != nil {
		return nil // not JSON: the store refuses it
	}
	key, path, ok := findReserved(v, "")
	if !ok {
		return nil
	}
	if path = strings.TrimPrefix(path, "."); path == "" {
		path = "the top level"
	}
	return unencodable{step.Permanent(fmt.Errorf("%s holds the reserved key %q at %s: keys starting with %s are engine internals and may not appear in what a step returns or sets",
		what, key, path, reservedPrefix))}
}

// findReserved walks v depth first (object keys in sorted order, so the
// error is stable) for a key starting with reservedPrefix; at is the path
// of the object holding it, built on path (".body.data[2]").
func findReserved(v any, path string) (key, at string, ok bool) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if strings.HasPrefix(k, reservedPrefix) {
				return k, path, true
			}
		}
		for _, k := range keys {
			if key, at, ok := findReserved(x[k], path+"."+k); ok {
				return key, at, true
			}
		}
	case []any:
		for i, e := range x {
			if key, at, ok := findReserved(e, path+"["+strconv.Itoa(i)+"]"); ok {
				return key, at, true
			}
		}
	}
	return "", "", false
}

// ReservedKeyIn reports an error naming the first object key of the JSON
// document b that starts with the reserved prefix __celestial, and where it
// is (`the reserved key "__celestialBlob" at body.data[2]`); nil when there
// is none or b is not JSON. Unlike the check of what a step stores, it
// decodes b whatever its bytes, so a key spelled with \u escapes is found
// too: wake and signal payloads are refused with it before a token is
// spent (the wait would otherwise fail on the payload it delivers).
func ReservedKeyIn(b []byte) error {
	v, err := jsonvalue.Decode(b)
	if err != nil {
		return nil
	}
	key, path, ok := findReserved(v, "")
	if !ok {
		return nil
	}
	if path = strings.TrimPrefix(path, "."); path == "" {
		path = "the top level"
	}
	return fmt.Errorf("the reserved key %q at %s: keys starting with %s are engine internals", key, path, reservedPrefix)
}
