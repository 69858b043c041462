package harness

// A test file may start what it tests on a higher layer: not reported.
import _ "github.com/awaken-dev/awaken/pkg/devserver"
