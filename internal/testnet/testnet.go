// Package testnet holds the network helpers tests share (standard library only). The
// e2e/blackbox test keeps its own copy: it imports nothing of awaken, by design.
package testnet

import (
	"net"
	"testing"
)

// FreePort returns a TCP port on the loopback that was free a moment ago, for a process
// the test starts and that needs its port before it listens (a server binary, a compose
// file). Another process may take it in between; tests that can let the process pick its
// own port (port 0) should.
func FreePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("testnet: find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
