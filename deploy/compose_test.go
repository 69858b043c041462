package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.yaml.in/yaml/v3"

	"github.com/awaken-dev/awaken/deploy"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/internal/testnet"
	"github.com/awaken-dev/awaken/pkg/awakentest"
	"github.com/awaken-dev/awaken/pkg/client"
	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// composeCommand returns the Compose command of this machine: the `docker compose`
// plugin, or the standalone docker-compose. Without either the test is skipped (failed
// with CI=true).
func composeCommand(t *testing.T) []string {
	t.Helper()
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	if exec.Command("docker-compose", "version").Run() == nil {
		return []string{"docker-compose"}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and neither `docker compose` nor docker-compose is installed")
	}
	t.Skip("neither `docker compose` nor docker-compose is installed")
	return nil
}

// compose runs the Compose command from the repository root with env added.
func compose(t *testing.T, ctx context.Context, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := composeCommand(t)
	c := exec.CommandContext(ctx, cmd[0], append(cmd[1:], args...)...)
	c.Dir = ".."
	c.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.String(), err
}

func TestCompose_configValidates(t *testing.T) {
	ctx := ctxFor(t, time.Minute)
	for _, tc := range []struct {
		name  string
		files []string
	}{
		{"single server", []string{"-f", "deploy/compose.yaml"}},
		{"3-node cluster", []string{"-f", "deploy/compose.yaml", "-f", "deploy/compose.cluster.yaml"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := compose(t, ctx, nil, append(tc.files, "config")...)
			if err != nil {
				t.Fatalf("compose config: %v\n%s", err, out)
			}
			var cfg struct {
				Services map[string]struct {
					Image         string            `yaml:"image"`
					ContainerName string            `yaml:"container_name"`
					Ports         []any             `yaml:"ports"`
					Environment   map[string]string `yaml:"environment"`
				} `yaml:"services"`
			}
			if err := yaml.Unmarshal([]byte(out), &cfg); err != nil {
				t.Fatal(err)
			}
			images := awakentest.DefaultImages()
			for name, s := range cfg.Services {
				// The images `make images` builds, nothing else (nothing can be pulled).
				if s.Image != images.Awaken && s.Image != images.NATS {
					t.Errorf("service %s runs image %q, want %s or %s", name, s.Image, images.Awaken, images.NATS)
				}
				if strings.HasPrefix(name, "nats") {
					continue
				}
				if name == "brain-exec" || name == "sandbox-exec" {
					if s.ContainerName != "" || len(s.Ports) > 0 {
						t.Errorf("executor %s has a fixed name or host port: it cannot scale", name)
					}
				}
				if name != "setup" && (s.Environment["NATS_USER"] != name || s.Environment["AWAKEN_ENSURE"] != "false") {
					t.Errorf("service %s connects as %q (ensure %q), want its own user and no ensure", name, s.Environment["NATS_USER"], s.Environment["AWAKEN_ENSURE"])
				}
			}
			// Every service user of auth.conf runs (the api included), and every NATS
			// node has the password of every user (an undefined one stops the server).
			for _, u := range deploy.ServiceUsers() {
				if _, ok := cfg.Services[u]; !ok {
					t.Errorf("no service for NATS user %s", u)
				}
			}
			for name, s := range cfg.Services {
				if !strings.HasPrefix(name, "nats") {
					continue
				}
				for _, u := range deploy.Users() {
					if s.Environment[deploy.PasswordEnv(u)] == "" {
						t.Errorf("%s has no %s", name, deploy.PasswordEnv(u))
					}
				}
			}
			// The api's HTTP port is published, on the loopback only.
			api := cfg.Services[deploy.UserAPI]
			if len(api.Ports) == 0 {
				t.Errorf("the api publishes no port")
			}
			for _, p := range api.Ports {
				host := ""
				switch p := p.(type) {
				case string: // Compose v1: "127.0.0.1:8080:8080/tcp"
					host, _, _ = strings.Cut(p, ":")
				case map[string]any: // Compose v2: {host_ip, published, target, ...}
					host, _ = p["host_ip"].(string)
				}
				if host != "127.0.0.1" {
					t.Errorf("the api publishes %v beyond the loopback", p)
				}
			}
			if api.Environment["NATS_URL"] != cfg.Services["gate"].Environment["NATS_URL"] {
				t.Errorf("the api connects to %q, the gate to %q", api.Environment["NATS_URL"], cfg.Services["gate"].Environment["NATS_URL"])
			}
		})
	}
}

// TestCompose_upCompletesABatch brings the default topology up with Compose (brain-exec
// scaled to 2), submits a batch from the host as the platform user, reads it back from
// the host through the api's HTTP port once the api container is healthy, and takes it
// down.
func TestCompose_upCompletesABatch(t *testing.T) {
	requireEngine(t)
	composeCommand(t)
	ctx := ctxFor(t, 4*time.Minute)
	port, apiPort := strconv.Itoa(testnet.FreePort(t)), strconv.Itoa(testnet.FreePort(t))
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	project := "awaken-test-" + hex.EncodeToString(id)
	env := []string{"AWAKEN_NATS_PORT=" + port, "AWAKEN_API_PORT=" + apiPort}
	files := []string{"-p", project, "-f", "deploy/compose.yaml"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if t.Failed() {
			out, _ := compose(t, ctx, env, append(files, "logs", "--tail", "40")...)
			t.Logf("compose logs:\n%s", out)
		}
		if out, err := compose(t, ctx, env, append(files, "down", "-v", "--remove-orphans", "-t", "10")...); err != nil {
			t.Errorf("compose down: %v\n%s", err, out)
		}
	})
	start := time.Now()
	if out, err := compose(t, ctx, env, append(files, "up", "-d", "--scale", "brain-exec=2")...); err != nil {
		t.Fatalf("compose up: %v\n%s", err, out)
	}
	t.Logf("compose up returned in %s", time.Since(start).Round(time.Millisecond))

	c, err := client.New(servicetest.Connect(t, "nats://127.0.0.1:"+port, nats.UserInfo("platform", "dev-platform"),
		nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1)))
	if err != nil {
		t.Fatal(err)
	}
	sub := exampleBatch(t, "batch-mixed.json")
	sub.RunID = "compose-" + hex.EncodeToString(id)
	res, err := c.SubmitAndWait(ctx, sub)
	if err != nil {
		t.Fatal(err)
	}
	wantTexts(t, res, "first", "1", "blocked:", "stubbed:", "tool execution failed: boom", `{"lines":2`, "unknown tool: nope")
	t.Logf("batch published %s after compose up", time.Since(start).Round(time.Millisecond))

	// The api: healthy by its container health check, and serving from the host, over
	// its loopback-published port, the batch the platform just submitted.
	out, err := compose(t, ctx, env, append(files, "ps", "-q", "api")...)
	container := strings.TrimSpace(out)
	if err != nil || container == "" {
		t.Fatalf("compose ps api: %v\n%s", err, out)
	}
	waitFor(t, ctx, "api container healthy", func() (bool, error) {
		st, err := exec.CommandContext(ctx, "docker", "inspect", "-f", "{{.State.Health.Status}}", container).Output()
		return strings.TrimSpace(string(st)) == "healthy", err
	})
	base := "http://127.0.0.1:" + apiPort + "/"
	var view httpapi.BatchView
	status, body := apiDo(t, ctx, "GET", base, "/v1/batches/"+res.BatchID, nil, &view)
	if status != http.StatusOK {
		t.Fatalf("GET batch from the host: %d %s", status, body)
	}
	if view.BatchID != res.BatchID || len(view.Calls) != len(sub.Calls) || view.Terminal != len(sub.Calls) ||
		(view.Phase != contracts.BatchPhaseFinalized && view.Phase != contracts.BatchPhasePublished) {
		t.Errorf("batch view %s: phase %s, %d of %d calls terminal", view.BatchID, view.Phase, view.Terminal, len(view.Calls))
	}
	t.Logf("api served the batch %s after compose up", time.Since(start).Round(time.Millisecond))
}
