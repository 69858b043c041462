// Package client breaks the rule that public packages keep off internal/bus.
package client

import _ "github.com/awaken-dev/awaken/internal/bus"
