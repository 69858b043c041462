package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
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
