// Package engine keeps the layers: the machinery may use wazero.
package engine

import _ "github.com/tetratelabs/wazero"
