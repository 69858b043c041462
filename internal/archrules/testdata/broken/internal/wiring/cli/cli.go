// Package cli is wiring: it may import service code, so this is no violation.
package cli

import _ "github.com/awaken-dev/awaken/services/alpha"
