package contracts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
)

// This file decodes a call's raw arguments into a tool's typed parameters, checking them
// against the schema derived from the type first so the model is told which field is wrong.

// DecodeArguments decodes a call's raw arguments into T. JSON null or empty arguments
// mean {}. The value must then satisfy T's derived schema (see [SchemaFor]): no unknown
// field (names match exactly, not case-insensitively), every required field present and
// not null, every value of the right type and within its declared constraints; and it must
// decode strictly into T. Any such failure is a [*ToolError] of kind
// [ToolErrorInvalidArguments] naming the field, which the model sees as "invalid tool
// arguments: …". A T whose schema cannot be derived is the tool author's fault, not the
// model's, and yields kind [ToolErrorExecution]. Optional fields may be null.
func DecodeArguments[T any](raw json.RawMessage) (T, error) {
	var zero T
	cs := compiledArgSchema(reflect.TypeFor[T]())
	if cs.err != nil {
		return zero, ExecutionFailed("tool argument schema: " + cs.err.Error())
	}
	data := bytes.TrimSpace(raw)
	if len(data) == 0 || bytes.Equal(data, []byte("null")) {
		data = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return zero, InvalidArguments("arguments are not valid JSON: " + err.Error())
	}
	if _, err := dec.Token(); err == nil {
		return zero, InvalidArguments("arguments have trailing data after the JSON value")
	}
	if err := cs.node.check(v, ""); err != nil {
		return zero, InvalidArguments(err.Error())
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	var out T
	if err := strict.Decode(&out); err != nil {
		return zero, InvalidArguments(describeDecodeError(err))
	}
	return out, nil
}

// describeDecodeError names the field of an encoding/json failure.
func describeDecodeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field != "" {
			return fmt.Sprintf("field %q: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return fmt.Sprintf("want %s, got %s", te.Type, te.Value)
	}
	return err.Error()
}
