// Command bigoutput is a hostile sandbox test module that writes 100 MiB to stdout in
// 64 KiB chunks, ignoring write errors, then exits 0.
package main

import "os"

func main() {
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	for written := 0; written < 100<<20; written += len(chunk) {
		_, _ = os.Stdout.Write(chunk)
	}
}
