package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

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
	srv, err := bus.StartEmbedded(bus.EmbeddedConfig{StoreDir: dir, Host: host, Port: port, ServerName: "awaken-dev", NoLog: true})
	if err != nil {
		return fmt.Errorf("dev: embedded NATS: %w", err)
	}
	defer bus.Shutdown(srv)
	log := NewLogger(os.Stderr, os.Getenv("AWAKEN_LOG_LEVEL"))
	st, err := Start(ctx, Options{Config: o.Config, Dial: InProcessDialer(srv), Log: log})
	if err != nil {
		return err
	}
	url := srv.ClientURL()
	log.Info().Str("nats_url", url).Str("data_dir", dir).Str("config", o.Config.Source).Msg("ready")
	if o.Ready != nil {
		o.Ready(url)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return st.Stop(stopCtx)
}
