// Command socket is a hostile sandbox test module that tries to reach the network: it
// dials the address given as {"addr": "host:port"} over TCP and UDP and tries to adopt
// inherited socket descriptors.
//
// Every attempt that succeeds is printed to stdout as "ESCAPED ..." and the module
// exits 0; when all fail, each failure is printed to stderr and it exits 1.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	var in struct {
		Addr string `json:"addr"`
	}
	data, _ := io.ReadAll(os.Stdin)
	_ = json.Unmarshal(data, &in)

	escaped := false
	try := func(what string, err error) {
		if err != nil {
			fmt.Fprintf(os.Stderr, "denied %s: %v\n", what, err)
			return
		}
		escaped = true
		fmt.Printf("ESCAPED %s\n", what)
	}

	conn, err := net.DialTimeout("tcp", in.Addr, 2*time.Second)
	if err == nil {
		_, err = conn.Write([]byte("escaped\n"))
		conn.Close()
	}
	try("dial tcp "+in.Addr, err)

	udp, err := net.Dial("udp", in.Addr)
	if err == nil {
		_, err = udp.Write([]byte("escaped\n"))
		udp.Close()
	}
	try("dial udp "+in.Addr, err)

	// Go's wasip1 port emulates listening with an in-process fake network, so a
	// successful Listen reaches no host socket; report it without counting it.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		fmt.Fprintf(os.Stderr, "listen tcp: in-process fake listener at %s, not a host socket\n", ln.Addr())
		ln.Close()
	} else {
		fmt.Fprintf(os.Stderr, "denied listen tcp: %v\n", err)
	}

	for fd := uintptr(3); fd < 8; fd++ {
		l, err := net.FileListener(os.NewFile(fd, "inherited"))
		if err == nil {
			l.Close()
		}
		try(fmt.Sprintf("adopt fd %d as a listener", fd), err)
	}

	if escaped {
		os.Exit(0)
	}
	os.Exit(1)
}
