package contracts

import (
	"encoding/json"
	"time"
)

// sampleToolArgs is the argument type of a realistic typed tool (its schema is pinned by
// pkg/contracts/typeschema's golden file and, inside a descriptor, by
// testdata/golden/wire_tool_descriptor.json).
type sampleAddress struct {
	Street string `json:"street" desc:"Street and number."`
	City   string `json:"city"`
}

type sampleEmbedded struct {
	Note string `json:"note,omitempty" desc:"A free note, with commas."`
}

type sampleToolArgs struct {
	Query   string            `json:"query" jsonschema:"description=What to search for\\, in plain words,minLength=1,maxLength=200"`
	Mode    string            `json:"mode,omitempty" jsonschema:"enum=fast|thorough,default=fast"`
	Limit   int               `json:"limit,omitempty" jsonschema:"minimum=1,maximum=50"`
	Ratio   float64           `json:"ratio,omitempty" jsonschema:"exclusiveMinimum=0,maximum=1"`
	Tags    []string          `json:"tags,omitempty" jsonschema:"enum=a|b|c,uniqueItems,maxItems=3"`
	Labels  map[string]string `json:"labels,omitempty"`
	Address *sampleAddress    `json:"address,omitempty" desc:"Where to deliver the result."`
	Home    sampleAddress     `json:"home"`
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

func (sampleToolArgs) ToolID() string          { return "search" }
func (sampleToolArgs) ToolDescription() string { return "Search the corpus." }

type recursiveArgs struct {
	Children []recursiveArgs `json:"children"`
}
