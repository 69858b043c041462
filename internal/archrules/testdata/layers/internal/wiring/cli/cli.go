// Package cli keeps the layers: the wiring imports a service.
package cli

import _ "github.com/awaken-dev/awaken/services/beta"
