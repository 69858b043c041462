package embedded_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/rs/zerolog"

	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natsserver"
	"github.com/awaken-dev/awaken/internal/wiring/app"
	"github.com/awaken-dev/awaken/internal/wiring/app/embedded"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestTheStackOwnsItsServer: Before sees the server before any service has connected,
// Login names each service's connection, URL is the server's, and Stop shuts the server
// down after the services, so that its store can be opened again at once.
func TestTheStackOwnsItsServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	var srv *server.Server
	var logins []string
	st, err := embedded.Start(ctx, app.Options{Config: &config.Config{}, Services: []string{contracts.ServiceBatcher, contracts.ServicePublisher}, Log: zerolog.Nop()},
		embedded.Options{
			Server: natsserver.EmbeddedConfig{StoreDir: dir, Port: -1, NoLog: true},
			Before: func(_ context.Context, s *server.Server) error {
				srv = s
				if n := s.NumClients(); n != 0 {
					t.Errorf("%d clients before the services start, want 0", n)
				}
				return nil
			},
			Login: func(name string) []nats.Option {
				logins = append(logins, name)
				return nil
			},
		})
	if err != nil {
		t.Fatal(err)
	}
	if srv == nil {
		t.Fatal("Before was not called")
	}
	slices.Sort(logins)
	if want := "awaken-" + contracts.ServiceBatcher + " awaken-" + contracts.ServicePublisher; strings.Join(logins, " ") != want {
		t.Errorf("logins %q, want %q", logins, want)
	}
	if st.URL() != srv.ClientURL() || st.URL() == "" {
		t.Errorf("URL %q, want the server's %q", st.URL(), srv.ClientURL())
	}
	nc, err := nats.Connect(st.URL())
	if err != nil {
		t.Fatalf("connect to the stack's URL: %v", err)
	}
	nc.Close()
	if err := st.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if srv.Running() {
		t.Fatal("the server runs on after Stop")
	}
	if err := st.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	again, err := natsserver.StartEmbedded(natsserver.EmbeddedConfig{StoreDir: dir, Port: -1, NoLog: true})
	if err != nil {
		t.Fatalf("reopen the store after Stop: %v", err)
	}
	natsserver.Shutdown(again)
}

// TestAFailedStartLeavesNoServer: whether Before or the stack fails, the server is down.
func TestAFailedStartLeavesNoServer(t *testing.T) {
	refused := errors.New("refused")
	for _, tc := range []struct {
		name     string
		services []string
		before   error
		want     string
	}{
		{"before fails", nil, refused, "refused"},
		{"unknown service", []string{"no-such-service"}, nil, `unknown service "no-such-service"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var srv *server.Server
			_, err := embedded.Start(context.Background(), app.Options{Config: &config.Config{}, Services: tc.services, Log: zerolog.Nop()},
				embedded.Options{
					Server: natsserver.EmbeddedConfig{StoreDir: t.TempDir(), Port: -1, NoLog: true},
					Before: func(_ context.Context, s *server.Server) error { srv = s; return tc.before },
				})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start = %v, want an error with %q", err, tc.want)
			}
			if srv == nil || srv.Running() {
				t.Fatal("the server runs on after a failed start")
			}
		})
	}
}

// TestAServerThatDoesNotStartIsAServerError: callers tell it from a stack that did not.
func TestAServerThatDoesNotStartIsAServerError(t *testing.T) {
	_, err := embedded.Start(context.Background(), app.Options{Config: &config.Config{}, Log: zerolog.Nop()},
		embedded.Options{Server: natsserver.EmbeddedConfig{Port: -1, NoLog: true}}) // no StoreDir
	var serr *embedded.ServerError
	if !errors.As(err, &serr) {
		t.Fatalf("Start = %v, want a *ServerError", err)
	}
}
