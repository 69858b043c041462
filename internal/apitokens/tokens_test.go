package apitokens_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/awaken-dev/awaken/internal/apitokens"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// writeTokens writes body as a tokens file only its owner may read (mode 0600) in a
// temporary directory of t and returns its path.
func writeTokens(t *testing.T, body string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// TestLoadTokensRoles: a third column names the token's roles; an unknown, empty or
// repeated role, or a fourth column, refuses the file.
func TestLoadTokensRoles(t *testing.T) {
	tokens, roles, err := apitokens.Load(writeTokens(t, "alice a1-0123456789abcdef approver,viewer\nbob b1-0123456789abcdef\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tokens) != 2 || roles["alice"] != apitokens.RolesOf(httpapi.RoleApprover, httpapi.RoleViewer) {
		t.Fatalf("tokens %v roles %v", tokens, roles)
	}
	if _, ok := roles["bob"]; ok {
		t.Fatalf("bob names no roles, yet has %v (want absent: every role)", roles["bob"])
	}
	for name, body := range map[string]string{
		"unknown role":  "alice a1-0123456789abcdef admin\n",
		"empty role":    "alice a1-0123456789abcdef viewer,,approver\n",
		"repeated role": "alice a1-0123456789abcdef viewer,viewer\n",
		"four fields":   "alice a1-0123456789abcdef viewer approver\n",
	} {
		if _, _, err := apitokens.Load(writeTokens(t, body)); !errors.Is(err, apitokens.ErrRefused) {
			t.Errorf("%s: %v, want ErrRefused", name, err)
		}
	}
}

// TestLoadTokensRefusesAmbiguity: a tokens file must name each token once, with a name an
// actor can carry, one "NAME TOKEN" per line.
func TestLoadTokensRefusesAmbiguity(t *testing.T) {
	for name, body := range map[string]string{
		"duplicate name":  "alice a1-0123456789abcdef\nalice a2-0123456789abcdef\n",
		"duplicate token": "alice same-0123456789abcdef\nbob same-0123456789abcdef\n",
		"bad name":        "al/ice a1-0123456789abcdef\n",
		"three fields":    "alice a1-0123456789abcdef extra\n",
		"name only":       "alice\n",
		// A file with no token once turned authentication off.
		"only comments":      "# alice a1-0123456789abcdef\n\n# nobody yet\n",
		"empty":              "",
		"short token":        "alice short\n",
		"reserved timer":     "timer a1-0123456789abcdef\n",
		"reserved anonymous": "Anonymous a1-0123456789abcdef\n",
		"reserved api-token": "api-token a1-0123456789abcdef\n",
		"reserved nats":      "nats-admin a1-0123456789abcdef\n",
		"reserved claimed":   "claimed a1-0123456789abcdef\n",
	} {
		file := writeTokens(t, body)
		_, _, err := apitokens.Load(file)
		if err == nil {
			t.Errorf("%s: %q loaded", name, body)
			continue
		}
		if !errors.Is(err, apitokens.ErrRefused) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: error %v, want ErrRefused naming %s", name, err, file)
		}
	}
	// Readable by others: refused, with the mode in the error; 0600 loads.
	file := writeTokens(t, "alice a1-0123456789abcdef\n")
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := apitokens.Load(file); !errors.Is(err, apitokens.ErrRefused) || !strings.Contains(err.Error(), "0644") {
		t.Errorf("a tokens file of mode 0644: %v, want refused", err)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if tokens, _, err := apitokens.Load(file); err != nil || tokens["alice"] != "a1-0123456789abcdef" {
		t.Errorf("a tokens file of mode 0600: %v %v", tokens, err)
	}
	if _, _, err := apitokens.Load(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing tokens file loaded")
	}
}
