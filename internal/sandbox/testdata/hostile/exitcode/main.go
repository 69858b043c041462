// Command exitcode is a sandbox test module that fails on purpose: a message on stderr
// and exit status 3.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "hostile: failing on purpose with status 3")
	os.Exit(3)
}
