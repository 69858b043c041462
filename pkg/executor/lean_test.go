package executor_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPublicPackagesLinkNoNATSServer pins that what a platform links to submit batches or
// to run its own tools stays a NATS client: neither pkg/client nor pkg/executor may
// depend on nats-server (the embedded server lives in internal/natsserver, reached only
// by `awaken dev`, the benchmarks and the tests).
func TestPublicPackagesLinkNoNATSServer(t *testing.T) {
	for _, pkg := range []string{"github.com/awaken-dev/awaken/pkg/client", "github.com/awaken-dev/awaken/pkg/executor"} {
		for _, dep := range deps(t, pkg) {
			if strings.HasPrefix(dep, "github.com/nats-io/nats-server") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// TestTheExecutorLinksNoService pins that a team writing one Go tool links the Brain
// executor's machinery (the executor hop, the registry, the bus) and nothing else of
// awaken: no service (the api, the gate, the sandbox with wazero, …) and not the wiring
// that assembles them (internal/wiring, which imports every service). The same rule, read
// from the sources, is internal/archrules' TestTheExecutorLinksNoServiceNoWiringNoWazero;
// this one asks the go command, so it also sees what a third-party dependency pulls in.
func TestTheExecutorLinksNoService(t *testing.T) {
	for _, dep := range deps(t, "github.com/awaken-dev/awaken/pkg/executor") {
		switch {
		case strings.HasPrefix(dep, "github.com/awaken-dev/awaken/services/"),
			strings.HasPrefix(dep, "github.com/awaken-dev/awaken/internal/wiring/"),
			strings.HasPrefix(dep, "github.com/awaken-dev/awaken/internal/sandbox"),
			strings.HasPrefix(dep, "github.com/tetratelabs/wazero"):
			t.Errorf("pkg/executor depends on %s", dep)
		}
	}
}

// deps lists pkg and every package it depends on (`go list -deps`).
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}
