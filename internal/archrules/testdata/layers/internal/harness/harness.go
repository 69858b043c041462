// Package harness breaks the layers: the machinery imports the wiring.
package harness

import _ "github.com/awaken-dev/awaken/internal/wiring/app"
