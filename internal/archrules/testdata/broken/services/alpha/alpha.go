package alpha

import (
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/beta"
)

var _ = contracts.X
var _ = beta.X
