package alpha

// A service's test may run the stack through the wiring: not reported.
import _ "github.com/awaken-dev/awaken/internal/wiring/app"
