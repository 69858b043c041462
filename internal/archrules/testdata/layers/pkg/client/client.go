// Package client breaks the layers: the vocabulary imports the machinery.
package client

import (
	_ "github.com/awaken-dev/awaken/internal/bus"
	_ "github.com/awaken-dev/awaken/pkg/contracts"
)
