package sub

import (
	"testing"

	"github.com/awaken-dev/awaken/services/alpha"
	"github.com/awaken-dev/awaken/services/beta"
)

func TestX(t *testing.T) { _, _ = alpha.X, beta.X }
