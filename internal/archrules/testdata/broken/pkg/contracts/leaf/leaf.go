// Package leaf keeps the rule: a package under pkg/contracts that uses only the standard
// library.
package leaf

import "strings"

var X = strings.ToUpper
