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
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			if strings.HasPrefix(dep, "github.com/nats-io/nats-server") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}
