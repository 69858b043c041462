// Command membomb is a hostile sandbox test module that allocates memory in 1 MiB
// chunks and touches every page. With {"mib": N} on stdin it stops after N MiB and
// prints {"allocated_mib": N}; without, it allocates until it dies.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

var keep [][]byte

func main() {
	var in struct {
		MiB int `json:"mib"`
	}
	data, _ := io.ReadAll(os.Stdin)
	_ = json.Unmarshal(data, &in)
	for n := 0; in.MiB == 0 || n < in.MiB; n++ {
		chunk := make([]byte, 1<<20)
		for i := 0; i < len(chunk); i += 4096 {
			chunk[i] = byte(n)
		}
		keep = append(keep, chunk)
	}
	fmt.Printf(`{"allocated_mib":%d}`+"\n", len(keep))
}
