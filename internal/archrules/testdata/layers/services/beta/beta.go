// Package beta keeps the layers.
package beta

import _ "github.com/awaken-dev/awaken/internal/bus"
