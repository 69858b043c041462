package contracts

import (
	"encoding/json"
	"fmt"
	"time"
)

// Duration is a time.Duration that reads and writes as a Go duration string ("2s",
// "1m30s") in JSON and YAML, so configuration and wire forms stay human-readable.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String renders d as a Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON accepts a duration string or a number of milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		return d.parse(s)
	}
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return fmt.Errorf("duration: want a string like \"2s\" or milliseconds, got %s", b)
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}

// JSONSchema describes d in a derived schema (see typeschema.Provider) as the duration
// string it is written as; without it the custom UnmarshalJSON would make the type one that
// reflection refuses to describe. (UnmarshalJSON also takes milliseconds, but the schema a
// model sees offers only the string.)
func (Duration) JSONSchema() json.RawMessage { return json.RawMessage(`{"type":"string"}`) }

// MarshalText writes d as a duration string (YAML and text encoders).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText parses a duration string (YAML and text decoders).
func (d *Duration) UnmarshalText(b []byte) error { return d.parse(string(b)) }

func (d *Duration) parse(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	if v < 0 {
		return fmt.Errorf("duration: %q is negative", s)
	}
	*d = Duration(v)
	return nil
}
