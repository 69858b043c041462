// Package devserver keeps the layers: an assembly on the wiring.
package devserver

import _ "github.com/awaken-dev/awaken/internal/wiring/app"
