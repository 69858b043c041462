// Package natsserver is the project's one door to nats-server: an embedded JetStream
// server for `awaken dev`, the benchmarks and the tests. It lives apart from internal/bus
// so that what only talks to NATS as a client (pkg/client, pkg/executor, the services)
// does not link the server.
package natsserver

import (
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
)

// DefaultMaxPayload is the largest message the embedded server accepts: 4 MiB, so a
// submission at the 1 MiB limit plus its headers fits with room to spare, and well under
// the 8 MiB above which nats-server warns.
const DefaultMaxPayload = 4 << 20

// minMaxPayload is the smallest max payload StartEmbedded accepts (2 MiB).
const minMaxPayload = 2 << 20

// DefaultReadyTimeout bounds how long StartEmbedded waits for the server to accept clients.
const DefaultReadyTimeout = 10 * time.Second

// EmbeddedConfig configures an in-process nats-server with JetStream.
type EmbeddedConfig struct {
	// StoreDir holds the JetStream file store; required, so that restarts keep state.
	StoreDir string
	// Host to listen on; default 127.0.0.1 (only this machine can connect).
	Host string
	// Port to listen on: 0 selects the NATS default 4222, -1 a random free port.
	Port int
	// ServerName names the server in logs and cluster metadata; default "awaken-dev".
	ServerName string
	// NoLog silences the server entirely.
	NoLog bool
	// Debug turns on the server's debug logging.
	Debug bool
	// MaxPayload is the largest accepted message in bytes; 0 means [DefaultMaxPayload].
	// Values below 2 MiB are refused: a 1 MiB submission plus headers must fit.
	MaxPayload int32
	// Logger receives the server's log as structured entries; when nil the server logs
	// to stderr in its own format (unless NoLog).
	Logger *zerolog.Logger
	// Sync is when the file store fsyncs its writes: [SyncLazy] (the zero value, the
	// server's default of a background sync every two minutes) or [SyncAlways] (before
	// every acknowledgement, as the container deployment's `sync_interval: always`).
	Sync Sync
	// ReadyTimeout bounds the wait for the server to accept clients; default
	// [DefaultReadyTimeout].
	ReadyTimeout time.Duration
	// Customize, when set, edits the server options last, before the server is created:
	// accounts, users and permissions (`awaken dev --secure` loads deploy/nats/auth.conf
	// here), or other settings this struct does not name. An error aborts the start.
	Customize func(*server.Options) error
}

// Sync is the durability level of the embedded server's file store.
type Sync string

const (
	// SyncLazy leaves fsync to the server's background timer (every two minutes): an
	// acknowledged write survives a crash of this process (the operating system has it)
	// but not a power loss or kernel crash before the next sync.
	SyncLazy Sync = "lazy"
	// SyncAlways fsyncs every write before it is acknowledged: an acknowledged write also
	// survives a power loss or kernel crash, at the cost of one fsync per write.
	SyncAlways Sync = "always"
)

// ParseSync reads a durability level as `awaken dev --sync` takes it: "always" or "lazy".
func ParseSync(s string) (Sync, error) {
	switch Sync(s) {
	case SyncAlways, SyncLazy:
		return Sync(s), nil
	}
	return "", fmt.Errorf("bus: sync %q: want %q or %q", s, SyncAlways, SyncLazy)
}

// StartEmbedded starts a JetStream-enabled nats-server in this process and waits until it
// accepts clients. The server installs no signal handlers (NoSigs), so the process's own
// SIGTERM handling can drain the services before the server shuts down. Stop it with
// [Shutdown].
func StartEmbedded(cfg EmbeddedConfig) (*server.Server, error) {
	if cfg.StoreDir == "" {
		return nil, errors.New("natsserver: embedded server: StoreDir is required")
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if cfg.MaxPayload < minMaxPayload {
		return nil, fmt.Errorf("natsserver: embedded server: max payload %d is below %d bytes", cfg.MaxPayload, minMaxPayload)
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ServerName == "" {
		cfg.ServerName = "awaken-dev"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	opts := &server.Options{
		ServerName: cfg.ServerName,
		Host:       cfg.Host,
		Port:       cfg.Port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		MaxPayload: cfg.MaxPayload,
		NoSigs:     true,
		NoLog:      cfg.NoLog,
		Debug:      cfg.Debug,
		SyncAlways: cfg.Sync == SyncAlways,
	}
	if cfg.Customize != nil {
		if err := cfg.Customize(opts); err != nil {
			return nil, fmt.Errorf("natsserver: embedded server: %w", err)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("natsserver: embedded server: %w", err)
	}
	switch {
	case cfg.NoLog:
	case cfg.Logger != nil:
		srv.SetLoggerV2(serverLogger{log: cfg.Logger.With().Str("component", "nats-server").Logger()}, cfg.Debug, false, false)
	default:
		srv.ConfigureLogger()
	}
	go srv.Start()
	if !srv.ReadyForConnections(cfg.ReadyTimeout) {
		Shutdown(srv)
		return nil, fmt.Errorf("natsserver: embedded server not ready within %s", cfg.ReadyTimeout)
	}
	if !srv.JetStreamEnabled() {
		Shutdown(srv)
		return nil, errors.New("natsserver: embedded server started without JetStream (see its log)")
	}
	return srv, nil
}

// Shutdown stops srv and waits until it has shut down, so its store can be reopened.
func Shutdown(srv *server.Server) {
	if srv == nil {
		return
	}
	srv.Shutdown()
	srv.WaitForShutdown()
}

// serverLogger adapts zerolog to the nats-server logger interface. Fatalf logs at error
// level and returns: an embedded server must never exit the process that hosts it.
type serverLogger struct{ log zerolog.Logger }

func (l serverLogger) Noticef(format string, v ...any) { l.log.Info().Msgf(format, v...) }
func (l serverLogger) Warnf(format string, v ...any)   { l.log.Warn().Msgf(format, v...) }
func (l serverLogger) Fatalf(format string, v ...any)  { l.log.Error().Msgf(format, v...) }
func (l serverLogger) Errorf(format string, v ...any)  { l.log.Error().Msgf(format, v...) }
func (l serverLogger) Debugf(format string, v ...any)  { l.log.Debug().Msgf(format, v...) }
func (l serverLogger) Tracef(format string, v ...any)  { l.log.Trace().Msgf(format, v...) }

// ConnectInProcess connects to an embedded server through its in-process pipe, without
// TCP. It is what `awaken dev` uses for its own services.
func ConnectInProcess(srv *server.Server, name string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	all := append([]nats.Option{
		nats.Name(name),
		nats.InProcessServer(srv),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(bus.ReconnectWait),
		nats.ReconnectBufSize(bus.ReconnectBuffer),
	}, opts...)
	nc, err := nats.Connect("", all...)
	if err != nil {
		return nil, nil, fmt.Errorf("natsserver: in-process connect as %s: %w", name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("natsserver: jetstream context for %s: %w", name, err)
	}
	return nc, js, nil
}
