// Package bus is machinery on the vocabulary.
package bus

import _ "github.com/awaken-dev/awaken/pkg/contracts"
