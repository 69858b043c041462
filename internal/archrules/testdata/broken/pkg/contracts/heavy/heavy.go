// Package heavy breaks the rule that a package under pkg/contracts is a standard-library
// leaf: it imports a module and reaches back into pkg/contracts.
package heavy

import (
	_ "github.com/awaken-dev/awaken/pkg/contracts"
	_ "github.com/santhosh-tekuri/jsonschema/v6"
)
