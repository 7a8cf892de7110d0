package expr

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/common/types/traits"
)

// OutputType compiles the bare CEL expression src and returns the type
// its checker infers for the result: "bool", "int", "string", "dyn" (known
// only when it runs: a field of a variable), "list(int)", …. Validation
// uses it to refuse, say, a retry_on that can never be a boolean.
func (e *Env) OutputType(src string) (string, error) {
	if strings.TrimSpace(src) == "" {
		return "", errors.New("empty expression")
	}
	e.compiling.Lock()
	defer e.compiling.Unlock()
	ast, iss := e.env.Compile(src)
	if iss.Err() != nil {
		return "", fmt.Errorf("%s", oneLine(iss.Err().Error()))
	}
	return ast.OutputType().String(), nil
}

// Record is a map value whose listed fields read as null when absent:
// `error.details` of an error without details is null, not a "no such
// key" failure, while the value itself (`${{ error }}`, its JSON, size,
// iteration) holds only the fields present. has(r.f) is true for a listed
// field, while `'f' in r` is true only for a field present; equality
// compares the fields present. Bind it as a variable's value; it is
// immutable.
type Record struct {
	traits.Mapper
	native map[string]any
	fields []string
}

// RecordCause is the one field of a Record whose map value reads as a
// Record too (an error's cause is an error); every other map value (an
// error's body, its details) is the caller's data and reads as it is.
const RecordCause = "cause"

// NewRecord returns a Record over m (plain JSON values, not modified
// afterwards) in which each of fields reads as null when absent. The
// value of RecordCause, when it is a map and one of fields, reads as a
// Record with the same fields.
func NewRecord(m map[string]any, fields ...string) *Record {
	return &Record{Mapper: types.DefaultTypeAdapter.NativeToValue(m).(traits.Mapper), native: m, fields: fields}
}

// Find implements traits.Mapper.
func (r *Record) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return r.Mapper.Find(key)
	}
	if v, present := r.native[string(k)]; present {
		if sub, isMap := v.(map[string]any); isMap && string(k) == RecordCause && slices.Contains(r.fields, RecordCause) {
			return NewRecord(sub, r.fields...), true
		}
		return r.Mapper.Find(key)
	}
	if slices.Contains(r.fields, string(k)) {
		return types.NullValue, true
	}
	return r.Mapper.Find(key)
}

// Get implements traits.Indexer.
func (r *Record) Get(key ref.Val) ref.Val {
	if v, ok := r.Find(key); ok {
		return v
	}
	return r.Mapper.Get(key)
}

// MarshalJSON writes the fields present.
func (r *Record) MarshalJSON() ([]byte, error) { return json.Marshal(r.native) }

// Native returns the fields present, as plain values.
func (r *Record) Native() map[string]any { return r.native }

// CancelledError is the error of an evaluation whose context was
// cancelled while it ran: Cause is the context's cause. It is not the
// expression's failure.
type CancelledError struct{ Cause error }

func (e *CancelledError) Error() string { return "evaluation cancelled: " + e.Cause.Error() }
func (e *CancelledError) Unwrap() error { return e.Cause }
