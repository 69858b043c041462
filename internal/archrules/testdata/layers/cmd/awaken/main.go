// The binary keeps the layers: it runs the wiring.
package main

import _ "github.com/awaken-dev/awaken/internal/wiring/cli"

func main() {}
