// Package render breaks the rule that only the wiring imports service code.
package render

import _ "github.com/awaken-dev/awaken/services/beta"
