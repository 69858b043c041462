// Package executor breaks the rule that public packages are not built on service code.
package executor

import _ "github.com/awaken-dev/awaken/services/alpha"
