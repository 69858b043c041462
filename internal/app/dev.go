package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/config"
)

// DevOptions configures `awaken dev`.
type DevOptions struct {
	Config *config.Config
	// DataDir holds the JetStream file store; in-flight batches survive a restart on it.
	DataDir string
	// Listen is the host:port outside clients (and the nats CLI) connect to.
	Listen string
	// Ready is called once everything is up, with the client URL.
	Ready func(url string)
	// Secure runs the embedded server with the accounts, users and permissions of
	// deploy/nats/auth.conf (the ones the containers use): each service connects as its
	// own least-privilege user, the streams are created by the admin user, and outside
	// clients must log in (the platform user for a platform).
	Secure bool
	// Passwords holds one password per user of [deploy.Users]; required with Secure.
	Passwords map[string]string
	// HTTP is the address of the health listener (/healthz, /readyz); empty for none.
	HTTP string
}

// Dev runs an embedded JetStream server and all five services until ctx is done, then
// drains the services and shuts the server down.
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
	log := NewLogger(os.Stderr, os.Getenv("AWAKEN_LOG_LEVEL"))
	ecfg := bus.EmbeddedConfig{StoreDir: dir, Host: host, Port: port, ServerName: "awaken-dev", NoLog: true}
	if o.Secure {
		if err := checkSecurePrefix(o.Config.Prefix); err != nil {
			return fmt.Errorf("dev --secure: %w", err)
		}
		if ecfg.Customize, err = SecureServerOptions(o.Passwords); err != nil {
			return fmt.Errorf("dev --secure: %w", err)
		}
	}
	srv, err := bus.StartEmbedded(ecfg)
	if err != nil {
		return fmt.Errorf("dev: embedded NATS: %w", err)
	}
	defer bus.Shutdown(srv)

	ready := &Readiness{}
	h, err := StartHealth(o.HTTP, ready, log)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	defer func() { _ = StopHealth(h) }()
	if h != nil {
		h.AddCheck("nats-server", func(context.Context) error { return embeddedReady(srv) })
	}

	opts := Options{Config: o.Config, Dial: ready.Dial(InProcessDialer(srv)), Log: log}
	if o.Secure {
		if err := setupAsAdmin(ctx, srv, o.Passwords[deploy.UserAdmin], o, log); err != nil {
			return fmt.Errorf("dev --secure: %w", err)
		}
		opts.Dial = ready.Dial(secureInProcessDialer(srv, o.Passwords))
		opts.NoEnsure = true
	}
	st, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	ready.SetStarted(true)
	url := srv.ClientURL()
	log.Info().Str("nats_url", url).Str("data_dir", dir).Str("config", o.Config.Source).Bool("secure", o.Secure).Msg("ready")
	if o.Ready != nil {
		o.Ready(url)
	}
	<-ctx.Done()
	ready.SetStarted(false)
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return st.Stop(stopCtx)
}

// embeddedReady reports whether the in-process server accepts clients with JetStream.
func embeddedReady(s *server.Server) error {
	if !s.Running() {
		return errors.New("embedded NATS server is not running")
	}
	if !s.JetStreamEnabled() {
		return errors.New("embedded NATS server has no JetStream")
	}
	return nil
}
