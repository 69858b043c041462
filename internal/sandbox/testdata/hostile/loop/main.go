// Command loop is a hostile sandbox test module that never returns: it spins on the
// CPU without calling the host, so only the engine's time limit can stop it.
package main

var sink uint64

func main() {
	for {
		sink++
	}
}
