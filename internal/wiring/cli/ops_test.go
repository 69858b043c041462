package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/natstest"
	"github.com/awaken-dev/awaken/internal/servicetest"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// TestHealthcheckExitCodes: `awaken healthcheck URL` is a container health check, so its
// exit code must be 0 exactly when the endpoint answers 200.
func TestHealthcheckExitCodes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"ready", []string{"healthcheck", srv.URL + "/readyz"}, 0},
		{"ready, flags after the URL", []string{"healthcheck", srv.URL + "/readyz", "--timeout", "2s"}, 0},
		{"unavailable", []string{"healthcheck", srv.URL + "/other"}, 1},
		{"nothing listening", []string{"healthcheck", closed.URL + "/readyz"}, 1},
		{"no URL", []string{"healthcheck"}, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if got := Main(context.Background(), tc.args, &out, &errb); got != tc.want {
				t.Fatalf("exit %d, want %d (%s)", got, tc.want, errb.String())
			}
		})
	}
}

func TestNATSCredentialFlags(t *testing.T) {
	t.Setenv("NATS_USER", "")
	t.Setenv("NATS_CREDS", "")
	t.Setenv("NATS_PASSWORD", "from-env")
	tests := []struct {
		name    string
		args    []string
		options int
		wantErr bool
	}{
		{"none", nil, 0, false},
		{"user, password from the environment", []string{"--nats-user", "gate"}, 1, false},
		{"credentials file", []string{"--nats-creds", "/x.creds"}, 1, false},
		{"both is a usage error", []string{"--nats-user", "gate", "--nats-creds", "/x.creds"}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFlags("test")
			auth := natsAuthFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			opts, err := auth()
			if (err != nil) != tc.wantErr || len(opts) != tc.options {
				t.Fatalf("%d options, error %v; want %d options, error %v", len(opts), err, tc.options, tc.wantErr)
			}
		})
	}
	// The password never appears in the usage text (flags' defaults are printed).
	var usage bytes.Buffer
	fs := newFlags("test")
	fs.SetOutput(&usage)
	natsAuthFlags(fs)
	fs.PrintDefaults()
	if bytes.Contains(usage.Bytes(), []byte("from-env")) {
		t.Errorf("usage shows the password:\n%s", usage.String())
	}
}

// TestSetupDryRunChangesNothing: `awaken setup --dry-run` on an empty server prints a
// creation per store and changes nothing; `awaken setup` then applies the retention of the
// configuration, and a second dry run with another retention prints the one setting it
// would change (store, field, old → new), still changing nothing.
func TestSetupDryRunChangesNothing(t *testing.T) {
	srv := natstest.Start(t)
	_, js := srv.Conn(t)
	ctx := servicetest.Context(t, 60*time.Second)
	dir := t.TempDir()
	write := func(yaml string) string {
		p := filepath.Join(dir, "awaken.yaml")
		if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	setup := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), append([]string{"setup", "--nats-url", srv.URL()}, args...), &stdout, &stderr); code != 0 {
			t.Fatalf("awaken setup %v: exit %d: %s", args, code, stderr.String())
		}
		return stdout.String()
	}
	names := contracts.NewNames(contracts.DefaultPrefix)

	cfg := write("retention: {events: 1h}\n")
	out := setup("--config", cfg, "--dry-run")
	if !strings.Contains(out, "stream "+names.EventsStream()+": create") || !strings.Contains(out, "nothing was changed") {
		t.Errorf("dry run on an empty server printed:\n%s", out)
	}
	if _, err := js.Stream(ctx, names.EventsStream()); err == nil {
		t.Fatal("the dry run created the events stream")
	}

	setup("--config", cfg)
	cfg = write("retention: {events: 2h}\n")
	out = setup("--config", cfg, "--dry-run")
	if want := "stream " + names.EventsStream() + ": max_age 1h0m0s → 2h0m0s"; !strings.Contains(out, want) ||
		!strings.Contains(out, "1 change(s)") {
		t.Errorf("dry run printed:\n%s\nwant the one line %q", out, want)
	}
	st, err := js.Stream(ctx, names.EventsStream())
	if err != nil {
		t.Fatal(err)
	}
	if got := st.CachedInfo().Config.MaxAge; got != time.Hour {
		t.Errorf("events max age %s after the dry run, want 1h (the dry run changes nothing)", got)
	}
}
