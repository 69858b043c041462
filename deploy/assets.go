// Package deploy holds the deployment of awaken as files — the Dockerfiles of the two
// images, the NATS server configurations with the least-privilege users, and
// compose.yaml — and embeds them, so that `awaken dev --secure` loads the very NATS users
// the containers run with, and pkg/awakentest builds the very images `make images` does.
//
// Its tests (part of `make test`) run the deployment on the local Docker engine; see
// README.md in this directory.
package deploy

import (
	"embed"
	"io/fs"
)

// files are the deployment assets. compose.yaml is left out on purpose: it refers to
// paths of the repository and is only meaningful there.
//
//go:embed awaken.Dockerfile nats.Dockerfile nats/auth.conf nats/single.conf nats/cluster.conf
var files embed.FS

// Asset paths inside [Files].
const (
	// AwakenDockerfile builds the awaken image (every service by subcommand).
	AwakenDockerfile = "awaken.Dockerfile"
	// NATSDockerfile builds the awaken-nats image.
	NATSDockerfile = "nats.Dockerfile"
	// NATSAuthConfig holds the NATS accounts, users and permissions.
	NATSAuthConfig = "nats/auth.conf"
	// NATSSingleConfig is the configuration of the single-server topology.
	NATSSingleConfig = "nats/single.conf"
	// NATSClusterConfig is the configuration of one node of the 3-node cluster.
	NATSClusterConfig = "nats/cluster.conf"
)

// Files returns the embedded deployment assets, read-only, by the paths above.
func Files() fs.FS { return files }

// ReadFile returns one embedded asset.
func ReadFile(name string) ([]byte, error) { return files.ReadFile(name) }
