package schemas

// Breaks the rule that the schemas (tests included) import no service.
import _ "github.com/awaken-dev/awaken/services/alpha"
