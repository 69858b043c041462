// Package sampleargs holds the argument types that the tests of schema derivation
// (pkg/contracts/typeschema), of tool descriptors (pkg/contracts) and of argument decoding
// (internal/toolreg) share, so the three check one realistic typed tool, not three copies
// that drift apart. Only tests import it.
//
// It imports nothing of the module: pkg/contracts/typeschema is a leaf that pkg/contracts
// builds on, so its tests cannot reach pkg/contracts (contracts.Duration), which is why the
// duration field's type is a parameter.
package sampleargs

import (
	"encoding/json"
	"time"
)

// ToolArgs is the argument type of a realistic typed tool: every kind of field the schema
// derivation knows. Duration is the type of its timeout field: contracts.Duration, or a
// stand-in with the same JSON form where that cannot be imported. Its schema is pinned by
// pkg/contracts/typeschema's testdata/golden/sample_tool.json and, inside a descriptor, by
// pkg/contracts' testdata/golden/wire_tool_descriptor.json.
type ToolArgs[Duration any] struct {
	Query   string            `json:"query" jsonschema:"description=What to search for\\, in plain words,minLength=1,maxLength=200"`
	Mode    string            `json:"mode,omitempty" jsonschema:"enum=fast|thorough,default=fast"`
	Limit   int               `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50"`
	Ratio   float64           `json:"ratio,omitempty" jsonschema:"exclusiveMinimum=0,maximum=1"`
	Tags    []string          `json:"tags,omitempty" jsonschema:"enum=a|b|c,uniqueItems,maxItems=3"`
	Labels  map[string]string `json:"labels,omitempty"`
	Address *Address          `json:"address,omitempty" desc:"Where to deliver the result."`
	Home    Address           `json:"home"`
	Since   time.Time         `json:"since,omitzero"`
	Extra   json.RawMessage   `json:"extra,omitempty"`
	Verbose bool              `json:"verbose"`
	Level   uint8             `json:"level,omitempty"`
	Count   int64             `json:"count,string,omitempty"`
	Timeout Duration          `json:"timeout,omitempty"`
	Blob    []byte            `json:"blob,omitempty"`
	Pair    [2]int            `json:"pair,omitempty"`
	Code    string            `json:"code,omitempty" jsonschema:"pattern=^[A-Z]{3}$"`
	sampleEmbedded
	ignored string // unexported: proves such fields are skipped
	Skip    string `json:"-"`
}

// ToolID and ToolDescription make ToolArgs describe its tool (contracts.DescriptorOf).
func (ToolArgs[Duration]) ToolID() string          { return "search" }
func (ToolArgs[Duration]) ToolDescription() string { return "Search the corpus." }

// Address is a nested object, required in ToolArgs.Home and optional in ToolArgs.Address.
type Address struct {
	Street string `json:"street" desc:"Street and number."`
	City   string `json:"city"`
}

// sampleEmbedded is embedded unexported, as encoding/json flattens it: its name must not
// reach the schema, its field must.
type sampleEmbedded struct {
	Note string `json:"note,omitempty" desc:"A free note, with commas."`
}

// Recursive refers to itself: no inlined schema can describe it.
type Recursive struct {
	Children []Recursive `json:"children"`
}
