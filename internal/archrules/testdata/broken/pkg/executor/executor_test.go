package executor

// A test file may import a service (to run it in a test): the rule is about what a public
// package links, so this import is not reported.
import _ "github.com/awaken-dev/awaken/services/beta"
