// Package gamma breaks the layers: a service imports a public assembly.
package gamma

import _ "github.com/awaken-dev/awaken/pkg/devserver"
