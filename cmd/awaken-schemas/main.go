// Command awaken-schemas writes the JSON Schemas of the protocol's documents, derived from
// their Go types, into the schemas folder (`make schemas`).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/awaken-dev/awaken/internal/schemas"
)

func main() {
	out := flag.String("out", "", "folder to write the schemas to (default: schemas/ of the module)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "awaken-schemas:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	root, err := schemas.ModuleRoot(".")
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join(root, schemas.Dir)
	}
	docs, err := schemas.Generate(root)
	if err != nil {
		return err
	}
	if err := schemas.Write(out, docs); err != nil {
		return err
	}
	fmt.Printf("wrote %d schemas to %s\n", len(docs), out)
	return nil
}
