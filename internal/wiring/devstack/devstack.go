// Package devstack runs `awaken dev`: an embedded JetStream server with every service and
// the api in one process, on the assembly of internal/wiring/app/embedded, plus what only
// the command needs: the data directory's lock, the address checks, the secure mode.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/apitokens"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/app/embedded"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/services/api"
)

// DevOptions configures `awaken dev`.
type DevOptions struct {
	Config *config.Config
	// Log is where the stack logs; nil means JSON lines on stderr at the level of
	// AWAKEN_LOG_LEVEL.
	Log *zerolog.Logger
	// DataDir holds the JetStream file store; in-flight batches survive a restart on it.
	DataDir string
	// Listen is the host:port outside clients (and the nats CLI) connect to.
	Listen string
	// Ready is called once everything is up, with the client URL.
	Ready func(url string)
	// HTTP is the host:port of the HTTP api and web console ("" serves neither; the micro
	// service still runs).
	HTTP string
	// APIToken, when set, is the bearer token the HTTP api requires.
	APIToken string
	// APITokens are further named bearer tokens of the HTTP api (--api-tokens).
	APITokens map[string]string
	// APITokenRoles are the roles of the named tokens whose line names some (apitokens.Load).
	APITokenRoles map[string]apitokens.RoleSet
	// PublicMetrics serves /metrics without the api token (see api.Options).
	PublicMetrics bool
	// ReadyURLs, when set, is called once everything is up with the NATS client URL and
	// the console URL ("" when HTTP is off).
	ReadyURLs func(natsURL, consoleURL string)
	// OpsHTTP, when set, is a separate operations listener (/metrics, /healthz, /readyz)
	// besides the api's HTTP server, which serves the same endpoints.
	OpsHTTP string
	// Secure runs the embedded server with the accounts, users and permissions of
	// deploy/nats/auth.conf (the ones the containers use): each service connects as its
	// own least-privilege user, the streams are created by the admin user, and outside
	// clients must log in (the platform user for a platform). The api (console, HTTP and
	// micro doors) connects as the api user.
	Secure bool
	// Passwords holds one password per user of [deploy.Users]; required with Secure.
	Passwords map[string]string
	// Sync is the embedded server's durability level; "" means [DefaultDevSync].
	Sync natsserver.Sync
	// StopNow, closed (by a second signal), cuts the graceful stop short: see
	// [servicerun.StopGracefully]. nil: the stop always drains, up to [servicerun.DefaultStopTimeout].
	StopNow <-chan struct{}
}

// DefaultCacheDir is where `awaken dev` keeps compiled WebAssembly, under its data
// directory, when the configuration sets no executors.sandbox.cache_dir.
const DefaultCacheDir = "wasm-cache"

// DefaultDevSync is `awaken dev`'s durability level: always, the promise of the container
// deployment (`sync_interval: always`), so that a batch the dev server acknowledged also
// survives a power loss; `--sync lazy` trades that for one fsync less per write.
const DefaultDevSync = natsserver.SyncAlways

// Dev runs an embedded JetStream server, all five services and then the api (micro
// service, HTTP api and console) until ctx is done, then drains them and shuts the server
// down.
func Dev(ctx context.Context, o DevOptions) error {
	host, portStr, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("dev: --listen %q: %w", o.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return fmt.Errorf("dev: --listen %q: bad port", o.Listen)
	}
	dir, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("dev: data dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("dev: data dir: %w", err)
	}
	// The lock first: a second `awaken dev` on this directory is told who has it, before
	// its ports (likely the same) are found taken.
	unlock, err := lockDataDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	// Compiled WebAssembly kept across restarts: without a cache every start recompiles
	// every sandbox module (seconds, not a fraction of one).
	if sb := &o.Config.Executors.Sandbox; sb.CacheDir == "" {
		sb.CacheDir = filepath.Join(dir, DefaultCacheDir)
	}
	if err := checkListen("--listen", o.Listen); err != nil {
		return err
	}
	if err := checkListen("--http", o.HTTP); err != nil {
		return err
	}
	log := servicerun.NewLogger(os.Stderr, os.Getenv("AWAKEN_LOG_LEVEL"))
	if o.Log != nil {
		log = *o.Log
	}
	if o.Sync == "" {
		o.Sync = DefaultDevSync
	}
	ecfg := natsserver.EmbeddedConfig{StoreDir: dir, Host: host, Port: port, ServerName: "awaken-dev", NoLog: true, Sync: o.Sync}
	if o.Secure {
		if err := checkSecurePrefix(o.Config.Prefix); err != nil {
			return fmt.Errorf("dev --secure: %w", err)
		}
		if ecfg.Customize, err = SecureServerOptions(o.Passwords, o.Config.Storage.Partitions); err != nil {
			return fmt.Errorf("dev --secure: %w", err)
		}
	}
	tp, shutdownTracing, err := telemetry.TracerProviderFromEnv(ctx, "awaken-dev", nil)
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := shutdownTracing(fctx); err != nil {
			log.Warn().Err(err).Msg("flushing traces failed")
		}
	}()
	// /metrics, /healthz and /readyz are served on the api's HTTP server (Start mounts the
	// registry and the whole stack's readiness there); OpsHTTP adds a separate listener.
	opts := app.Options{
		Config: o.Config, Log: log,
		Services:       append(app.AllServices(), contracts.ServiceAPI),
		API:            api.Options{HTTPAddr: o.HTTP, Token: o.APIToken, Tokens: o.APITokens, TokenRoles: o.APITokenRoles, PublicMetrics: o.PublicMetrics},
		TracerProvider: tp,
		HTTPAddr:       o.OpsHTTP,
	}
	eo := embedded.Options{Server: ecfg, Before: func(ctx context.Context, srv *server.Server) error {
		log.Info().Str("sync", string(o.Sync)).Str("survives", syncSurvives(o.Sync)).Msg("embedded JetStream durability")
		if !o.Secure {
			return nil
		}
		if err := setupAsAdmin(ctx, srv, o.Passwords[deploy.UserAdmin], o, log); err != nil {
			return fmt.Errorf("dev --secure: %w", err)
		}
		return nil
	}}
	if o.Secure {
		eo.Login = secureLogin(o.Passwords)
		opts.NoEnsure = true
	}
	st, err := embedded.Start(ctx, opts, eo)
	var serverErr *embedded.ServerError
	if errors.As(err, &serverErr) {
		return mapServerError(o.Listen, serverErr.Err)
	}
	if err != nil {
		return err
	}
	url := st.URL()
	console := ""
	if st.APIService != nil {
		console = st.APIService.URL()
	}
	log.Info().Str("nats_url", url).Str("console", console).Str("data_dir", dir).Str("wasm_cache", o.Config.Executors.Sandbox.CacheDir).Str("config", o.Config.Source).Bool("secure", o.Secure).Msg("ready")
	if o.Ready != nil {
		o.Ready(url)
	}
	if o.ReadyURLs != nil {
		o.ReadyURLs(url, console)
	}
	<-ctx.Done()
	return servicerun.StopGracefully(st.Stack, log, servicerun.DefaultStopTimeout, o.StopNow)
}

// secureLogin connects each service to the embedded server as its own NATS user of
// deploy/nats/auth.conf, with its own inbox prefix.
func secureLogin(passwords map[string]string) func(name string) []nats.Option {
	return func(name string) []nats.Option {
		svc := strings.TrimPrefix(name, "awaken-")
		return []nats.Option{nats.UserInfo(svc, passwords[svc]), nats.CustomInboxPrefix(deploy.ServiceInboxPrefix(svc))}
	}
}

// SecureServerOptions returns a [natsserver.EmbeddedConfig.Customize] hook that loads the
// accounts, users and permissions of deploy/nats/auth.conf, with the grants of every
// one of partitions partitions ([deploy.PartitionedAuthConf]), with passwords (one per
// user of [deploy.Users]).
func SecureServerOptions(passwords map[string]string, partitions int) (func(*server.Options) error, error) {
	text, err := deploy.AuthConfig(passwords, partitions)
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

// setupAsAdmin runs [servicerun.Setup] on an in-process connection of the admin user.
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
	return servicerun.Setup(ctx, js, o.Config, log)
}

// syncSurvives says in the start log what an acknowledged write survives at level s.
func syncSurvives(s natsserver.Sync) string {
	if s == natsserver.SyncAlways {
		return "process crash and power loss (fsync before every acknowledgement)"
	}
	return "process crash; NOT a power loss or kernel crash within the two-minute sync interval"
}
