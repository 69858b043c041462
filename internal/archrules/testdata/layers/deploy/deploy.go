// Package deploy is machinery on the vocabulary.
package deploy

import _ "github.com/awaken-dev/awaken/pkg/contracts"
