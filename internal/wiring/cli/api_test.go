package cli

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicerun"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/telemetry"
	"github.com/awaken-dev/awaken/internal/wiring/devstack/devstacktest"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// TestAPIConnectsAsItsOwnUser runs `awaken api` against a server that loads
// deploy/nats/auth.conf, with the credentials in NATS_USER/NATS_PASSWORD and
// --ensure=false, as the compose deployment does: it must come up (its inbox prefix is the
// only one the api user may read), log the ready line the container tests wait for, and
// serve the micro service and the tickets gauge through the api user's connection.
func TestAPIConnectsAsItsOwnUser(t *testing.T) {
	const configPath = "../../../examples/awaken.yaml"
	srv, pw := devstacktest.StartSecure(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := servicetest.Connect(t, srv.ClientURL(), nats.UserInfo(deploy.UserAdmin, pw[deploy.UserAdmin]))
	js, err := jetstream.New(admin)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(configPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := servicerun.Setup(ctx, js, cfg, servicerun.NewLogger(io.Discard, "")); err != nil {
		t.Fatal(err)
	}

	t.Setenv("NATS_USER", deploy.UserAPI)
	t.Setenv("NATS_PASSWORD", pw[deploy.UserAPI])
	t.Setenv("NATS_CREDS", "")
	var stderr natstest.SyncBuffer
	// stdout through a pipe: the test reads the ready line the moment it is written.
	outR, outW := io.Pipe()
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	runCtx, stop := context.WithCancel(ctx)
	exited := make(chan int, 1)
	go func() {
		exited <- Main(runCtx, []string{"api", "--nats-url", srv.ClientURL(), "--config", configPath,
			"--ensure=false", "--http", "127.0.0.1:0"}, outW, &stderr)
		outW.Close()
	}()
	defer func() {
		stop()
		if code := <-exited; code != 0 {
			t.Errorf("awaken api exited %d:\n%s", code, stderr.String())
		}
	}()
	consoleRE := regexp.MustCompile(`^awaken api ready: .* console (http://\S+/)$`)
	var console string
	for console == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("awaken api ended before it was ready:\n%s", stderr.String())
			}
			if m := consoleRE.FindStringSubmatch(line); m != nil {
				console = m[1]
			}
		case <-ctx.Done():
			t.Fatalf("awaken api not ready: %v\n%s", ctx.Err(), stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), `"message":"ready"`) {
		t.Errorf("no ready log line:\n%s", stderr.String())
	}

	m, err := admin.RequestWithContext(ctx, httpapi.MicroSubject(cfg.Names().Prefix, httpapi.EndpointTicketsList), nil)
	if err != nil {
		t.Fatalf("micro tickets.list: %v", err)
	}
	if code := m.Header.Get(micro.ErrorCodeHeader); code != "" {
		t.Errorf("micro tickets.list: %s %s", code, m.Data)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, console+"metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The api runs without the gate, so the tickets gauge scans the bucket as the api user.
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), telemetry.MetricTicketsScrape+" 0\n") {
		t.Errorf("GET /metrics: %d, tickets scrape failed:\n%s", resp.StatusCode, body)
	}
}
