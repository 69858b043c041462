// Package app breaks the layers: the wiring imports a public assembly.
package app

import (
	_ "github.com/awaken-dev/awaken/pkg/awakentest"
	_ "github.com/awaken-dev/awaken/services/alpha"
)
