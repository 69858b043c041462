// Package tool breaks the rule that the tool vocabulary is a leaf; its allowed imports are
// not reported.
package tool

import (
	_ "github.com/awaken-dev/awaken/internal/config"
	_ "github.com/awaken-dev/awaken/internal/toolctx"
	_ "github.com/awaken-dev/awaken/pkg/contracts"
)
