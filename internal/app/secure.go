package app

import (
	"context"
	"fmt"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/pkg/contracts"
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

// secureInProcessDialer connects each service to an embedded server as its own NATS user
// of deploy/nats/auth.conf, with its own inbox prefix.
func secureInProcessDialer(s *server.Server, passwords map[string]string) func(name string) (*nats.Conn, error) {
	return func(name string) (*nats.Conn, error) {
		svc := strings.TrimPrefix(name, "awaken-")
		return nats.Connect("", nats.InProcessServer(s), nats.Name(name), nats.MaxReconnects(-1),
			nats.UserInfo(svc, passwords[svc]), nats.CustomInboxPrefix(deploy.ServiceInboxPrefix(svc)))
	}
}

// SecureServerOptions returns a [bus.EmbeddedConfig.Customize] hook that loads the
// accounts, users and permissions of deploy/nats/auth.conf with passwords (one per user
// of [deploy.Users]).
func SecureServerOptions(passwords map[string]string) (func(*server.Options) error, error) {
	text, err := deploy.AuthConfig(passwords)
	if err != nil {
		return nil, err
	}
	return func(o *server.Options) error {
		if err := o.ProcessConfigString(text); err != nil {
			return fmt.Errorf("load deploy/nats/auth.conf: %w", err)
		}
		return nil
	}, nil
}

// checkSecurePrefix refuses a configuration whose subject prefix the permissions of
// deploy/nats/auth.conf do not name.
func checkSecurePrefix(prefix string) error {
	if prefix != "" && prefix != contracts.DefaultPrefix {
		return fmt.Errorf("deploy/nats/auth.conf grants the subjects of prefix %q, but the configuration uses %q", contracts.DefaultPrefix, prefix)
	}
	return nil
}

// setupAsAdmin runs [Setup] on an in-process connection of the admin user.
func setupAsAdmin(ctx context.Context, s *server.Server, password string, o DevOptions, log zerolog.Logger) error {
	nc, err := nats.Connect("", nats.InProcessServer(s), nats.Name("awaken-setup"), nats.UserInfo(deploy.UserAdmin, password))
	if err != nil {
		return fmt.Errorf("dev: connect as %s: %w", deploy.UserAdmin, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	return Setup(ctx, js, o.Config, log)
}
