package servicerun

import (
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/awaken-dev/awaken/deploy"
)

// ServiceDialer dials url for each service like [URLDialer], adding the service's own
// reply-inbox prefix ([deploy.ServiceInboxPrefix]): the least-privilege users of
// deploy/nats/auth.conf may only subscribe to their own inboxes. opts (credentials, TLS)
// apply to every service. The dial name is "awaken-<service>", as [Start] passes it.
func ServiceDialer(url string, opts ...nats.Option) func(name string) (*nats.Conn, error) {
	return func(name string) (*nats.Conn, error) {
		svc := strings.TrimPrefix(name, "awaken-")
		all := append(append([]nats.Option(nil), opts...), nats.CustomInboxPrefix(deploy.ServiceInboxPrefix(svc)))
		return URLDialer(url, all...)(name)
	}
}
