package render

// A test file may run a service: no violation.
import _ "github.com/awaken-dev/awaken/services/alpha"
