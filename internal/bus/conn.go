package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Reconnect settings shared by every awaken connection (exported for internal/natsserver).
const (
	ReconnectWait   = 250 * time.Millisecond
	ReconnectJitter = 250 * time.Millisecond
	// ReconnectBuffer holds publishes made while disconnected; 16 MiB fits several
	// maximum-size submissions. Past it, publishes fail fast instead of blocking.
	ReconnectBuffer = 16 << 20
)

// Connect dials url with options fit for a long-running service: it reconnects forever
// (a service must survive a NATS restart or leader change without being restarted
// itself), buffers publishes while reconnecting, and retries the first connection until
// ctx ends, so services may start before the server. opts are applied after the defaults
// and may override them. The returned JetStream context uses the connection; closing the
// connection is the caller's job.
func Connect(ctx context.Context, url, name string, opts ...nats.Option) (*nats.Conn, jetstream.JetStream, error) {
	all := append([]nats.Option{
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(ReconnectWait),
		nats.ReconnectJitter(ReconnectJitter, ReconnectJitter),
		nats.ReconnectBufSize(ReconnectBuffer),
		nats.RetryOnFailedConnect(true),
	}, opts...)
	nc, err := nats.Connect(url, all...)
	if err != nil {
		return nil, nil, fmt.Errorf("bus: connect %s as %s: %w", url, name, err)
	}
	if err := waitConnected(ctx, nc); err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("bus: connect %s as %s: %w", url, name, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, fmt.Errorf("bus: jetstream context for %s: %w", name, err)
	}
	return nc, js, nil
}

// waitConnected blocks until nc is connected or ctx ends. With RetryOnFailedConnect,
// nats.Connect returns before the first connection succeeds.
func waitConnected(ctx context.Context, nc *nats.Conn) error {
	ch := nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	defer nc.RemoveStatusListener(ch)
	for {
		switch nc.Status() {
		case nats.CONNECTED:
			return nil
		case nats.CLOSED:
			return nats.ErrConnectionClosed
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the first connection: %w", ctx.Err())
		}
	}
}

// LogConnectionEvents returns a [nats.Option] that logs disconnects, reconnects,
// asynchronous errors (for example slow consumers) and the final close on log.
func LogConnectionEvents(log zerolog.Logger) nats.Option {
	return func(o *nats.Options) error {
		o.DisconnectedErrCB = func(nc *nats.Conn, err error) {
			log.Warn().Err(err).Str("conn", nc.Opts.Name).Msg("nats disconnected")
		}
		o.ReconnectedCB = func(nc *nats.Conn) {
			log.Info().Str("conn", nc.Opts.Name).Str("url", nc.ConnectedUrlRedacted()).Msg("nats reconnected")
		}
		o.ClosedCB = func(nc *nats.Conn) {
			log.Info().Str("conn", nc.Opts.Name).Msg("nats connection closed")
		}
		o.AsyncErrorCB = func(nc *nats.Conn, sub *nats.Subscription, err error) {
			ev := log.Error().Err(err).Str("conn", nc.Opts.Name)
			if sub != nil {
				ev = ev.Str("subscription", sub.Subject)
			}
			ev.Msg("nats asynchronous error")
		}
		return nil
	}
}
