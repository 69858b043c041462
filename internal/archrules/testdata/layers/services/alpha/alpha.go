// Package alpha breaks the layers: a service imports the wiring.
package alpha

import _ "github.com/awaken-dev/awaken/internal/wiring/cli"
