// Command readfile is a hostile sandbox test module that tries to read the host's
// filesystem: system files, the work tree, and, when a scratch directory is mounted,
// escapes from it through "..", symlinks and hard links.
//
// Every attempt that succeeds is printed to stdout as "ESCAPED ..." and the module
// exits 0; when all fail, each failure is printed to stderr and it exits 1.
package main

import (
	"fmt"
	"os"
)

func main() {
	escaped := false
	try := func(what string, err error, got string) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "denied %s: %v\n", what, err)
			return
		}
		escaped = true
		fmt.Printf("ESCAPED %s: %.200q\n", what, got)
	}
	readFile := func(path string) {
		b, err := os.ReadFile(path)
		try("read "+path, err, string(b))
	}
	readDir := func(path string) {
		entries, err := os.ReadDir(path)
		names := ""
		for _, e := range entries {
			names += e.Name() + " "
		}
		try("list "+path, err, names)
	}

	readFile("/etc/passwd")
	readFile("/proc/self/environ")
	readDir("/work")
	readDir("/etc")
	readDir("/tmp")
	readFile("/scratch/../etc/passwd")
	readFile("/scratch/../../../../../../etc/passwd")

	if _, err := os.Stat("/scratch"); err == nil {
		// A relative symlink is the classic escape from a directory mount.
		err := os.Symlink("../../../../../../../../etc/passwd", "/scratch/evil")
		try("symlink /scratch/evil -> ../../etc/passwd", err, "created")
		readFile("/scratch/evil")
		err = os.Symlink("../../../../../../../..", "/scratch/up")
		try("symlink /scratch/up -> ../../..", err, "created")
		readFile("/scratch/up/etc/passwd")
		err = os.Link("/etc/passwd", "/scratch/hard")
		try("hard link /etc/passwd -> /scratch/hard", err, "created")
		readFile("/scratch/hard")
	}

	if escaped {
		os.Exit(0)
	}
	os.Exit(1)
}
