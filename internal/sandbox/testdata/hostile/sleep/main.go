// Command sleep is a hostile sandbox test module that blocks in the host for an hour
// (WASI poll_oneoff on a clock), where wazero cannot interrupt WebAssembly execution;
// the engine's sleep implementation must still honour the time limit.
package main

import "time"

func main() {
	time.Sleep(time.Hour)
}
