// Package contracts breaks the rule that the vocabulary uses only the standard library and
// its own leaves; the import of the leaf is allowed and not reported.
package contracts

import (
	"encoding/json"

	"github.com/awaken-dev/awaken/internal/jsonschema"
	"github.com/awaken-dev/awaken/pkg/contracts/leaf"
	"github.com/nats-io/nats.go"
)

var _ = json.Valid
var _ = nats.Connect
var _ = jsonschema.Compile
var _ = leaf.X
