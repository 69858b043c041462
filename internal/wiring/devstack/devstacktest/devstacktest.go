// Package devstacktest starts the least-privilege embedded server for tests (a package of
// its own so the awaken binary does not link package testing).
package devstacktest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/wiring/devstack"
)

// StartSecure starts an embedded server in a temporary directory of tb with the accounts,
// users and permissions of deploy/nats/auth.conf (fresh passwords, returned by user),
// stopped when tb ends: the least-privilege deployment's server, for tests that prove each
// user may do what it needs and no more.
func StartSecure(tb testing.TB) (*server.Server, map[string]string) {
	tb.Helper()
	return StartSecurePartitions(tb, 1)
}

// StartSecurePartitions is [StartSecure] for a deployment of partitions partitions
// (storage.partitions): the grants of every partition's stores and subjects.
func StartSecurePartitions(tb testing.TB, partitions int) (*server.Server, map[string]string) {
	tb.Helper()
	pw, err := deploy.GeneratePasswords()
	if err != nil {
		tb.Fatal(err)
	}
	customize, err := devstack.SecureServerOptions(pw, partitions)
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: tb.TempDir(), Port: -1, NoLog: true, Customize: customize})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { natsserver.Shutdown(srv) })
	return srv, pw
}
