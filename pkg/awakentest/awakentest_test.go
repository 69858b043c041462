package awakentest

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestDisableRyuk(t *testing.T) {
	tests := []struct {
		name  string
		set   bool
		value string
		want  string
	}{
		{"unset: disabled by the package", false, "", "true"},
		{"explicitly enabled: left alone", true, "false", "false"},
		{"explicitly disabled: left alone", true, "true", "true"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TESTCONTAINERS_RYUK_DISABLED", tc.value) // restored after the test
			if !tc.set {
				_ = os.Unsetenv("TESTCONTAINERS_RYUK_DISABLED")
			}
			DisableRyuk()
			if got := os.Getenv("TESTCONTAINERS_RYUK_DISABLED"); got != tc.want {
				t.Fatalf("TESTCONTAINERS_RYUK_DISABLED=%q, want %q", got, tc.want)
			}
		})
	}
}

// TestDefaultImagesMatchGoMod: the NATS image tag is the nats-server version go.mod pins,
// which is also the tag `make images` builds and compose.yaml runs.
func TestDefaultImagesMatchGoMod(t *testing.T) {
	dir, err := RepoDir()
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`github.com/nats-io/nats-server/v2 v(\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod does not require nats-server/v2")
	}
	if got, want := DefaultImages().NATS, "awaken-nats:"+string(m[1]); got != want {
		t.Errorf("default NATS image %q, want %q", got, want)
	}
	compose, err := os.ReadFile(filepath.Join(dir, "deploy", "compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`image: ` + regexp.QuoteMeta(DefaultImages().NATS) + `\n`).Match(compose) {
		t.Errorf("deploy/compose.yaml does not run %s", DefaultImages().NATS)
	}
}

func TestHostAddress(t *testing.T) {
	tests := []struct {
		name, override, dockerHost string
		bind, dial                 string
	}{
		{"local socket", "", "", "127.0.0.1", "127.0.0.1"},
		{"explicit unix socket", "", "unix:///var/run/docker.sock", "127.0.0.1", "127.0.0.1"},
		{"remote engine", "", "tcp://10.1.2.3:2376", "0.0.0.0", "10.1.2.3"},
		{"override wins", "docker.internal", "tcp://10.1.2.3:2376", "0.0.0.0", "docker.internal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("TESTCONTAINERS_HOST_OVERRIDE", tc.override)
			t.Setenv("DOCKER_HOST", tc.dockerHost)
			bind, dial := hostAddress()
			if bind != tc.bind || dial != tc.dial {
				t.Errorf("hostAddress() = %s, %s; want %s, %s", bind, dial, tc.bind, tc.dial)
			}
		})
	}
}
