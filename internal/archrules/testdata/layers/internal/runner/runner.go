// Package runner keeps the layers; it links the engine, and with it wazero.
package runner

import (
	_ "github.com/awaken-dev/awaken/internal/bus"
	_ "github.com/awaken-dev/awaken/internal/engine"
)
