package contracts

import (
	"encoding/json"

	"github.com/nats-io/nats.go"
)

var _ = json.Valid
var _ = nats.Connect
