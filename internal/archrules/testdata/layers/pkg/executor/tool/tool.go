// Package tool keeps the layers: internal/toolctx is vocabulary like it.
package tool

import (
	_ "github.com/awaken-dev/awaken/internal/toolctx"
	_ "github.com/awaken-dev/awaken/pkg/contracts"
)
