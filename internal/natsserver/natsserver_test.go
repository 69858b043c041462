package natsserver_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/bus"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/pkg/cloudevent"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

func TestStartEmbeddedConfig(t *testing.T) {
	tests := []struct {
		name    string
		cfg     natsserver.EmbeddedConfig
		wantErr string
	}{
		{"store dir required", natsserver.EmbeddedConfig{Port: -1, NoLog: true}, "StoreDir"},
		{"max payload below 2 MiB", natsserver.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, NoLog: true, MaxPayload: 1 << 20}, "max payload"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := natsserver.StartEmbedded(tc.cfg)
			if err == nil {
				natsserver.Shutdown(srv)
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v does not mention %s", err, tc.wantErr)
			}
		})
	}
}

func TestEmbeddedServerCarriesLargeSubmissions(t *testing.T) {
	logs := &natstest.SyncBuffer{}
	log := zerolog.New(logs)
	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, Logger: &log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsserver.Shutdown(srv) })
	if !strings.Contains(logs.String(), `"component":"nats-server"`) {
		t.Fatalf("server log not routed to zerolog: %q", logs.String())
	}

	nc, js, err := natsserver.ConnectInProcess(srv, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if got := nc.MaxPayload(); got != natsserver.DefaultMaxPayload {
		t.Fatalf("max payload %d, want %d", got, natsserver.DefaultMaxPayload)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	names := contracts.NewNames("")
	if err := bus.EnsureTopology(ctx, js, names, bus.TopologyConfig{}); err != nil {
		t.Fatal(err)
	}
	// A submission at the 1 MiB limit plus its CloudEvent headers fits.
	payload := fmt.Sprintf(`{"blob":%q}`, strings.Repeat("x", contracts.MaxSubmissionBytes-12))
	e, err := cloudevent.NewEvent("tool-batch:run-1:1", "platform", contracts.TypeBatchRequested, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Data = []byte(payload)
	if _, err := bus.NewPublisher(js).Publish(ctx, names.SubmitSubject(), e); err != nil {
		t.Fatalf("publishing a %d-byte submission: %v", len(payload), err)
	}
}

func TestConnectWaitsForALateServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)

	type conn struct {
		js  jetstream.JetStream
		err error
	}
	done := make(chan conn, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go func() {
		nc, js, err := bus.Connect(ctx, url, "late")
		if err == nil {
			t.Cleanup(nc.Close)
		}
		done <- conn{js, err}
	}()

	srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir(), Port: port, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { natsserver.Shutdown(srv) })
	c := <-done
	if c.err != nil {
		t.Fatalf("Connect before the server was up: %v", c.err)
	}
	if _, err := c.js.AccountInfo(ctx); err != nil {
		t.Fatalf("JetStream unusable after a late connect: %v", err)
	}
}

func TestConnectGivesUpWithContext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("nats://%s", l.Addr())
	_ = l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, _, err = bus.Connect(ctx, url, "nobody-home")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context deadline", err)
	}
}

// TestEmbeddedSyncLevel: the durability level reaches the JetStream file store, and a
// level other than always/lazy is refused.
func TestEmbeddedSyncLevel(t *testing.T) {
	for _, level := range []string{"always", "lazy"} {
		t.Run(level, func(t *testing.T) {
			sync, err := natsserver.ParseSync(level)
			if err != nil {
				t.Fatal(err)
			}
			srv, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, NoLog: true, Sync: sync})
			if err != nil {
				t.Fatal(err)
			}
			defer natsserver.Shutdown(srv)
			if got, want := srv.JetStreamConfig().SyncAlways, level == "always"; got != want {
				t.Fatalf("sync %s: JetStream SyncAlways = %v, want %v", level, got, want)
			}
		})
	}
	if _, err := natsserver.ParseSync("sometimes"); err == nil {
		t.Fatal(`ParseSync("sometimes") accepted`)
	}
}
