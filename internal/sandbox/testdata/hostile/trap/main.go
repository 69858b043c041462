// Command trap is a hostile sandbox test module that panics; Go's wasip1 runtime
// reports the panic on stderr and exits with status 2.
package main

func main() {
	panic("hostile: deliberate panic")
}
