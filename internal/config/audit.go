package config

import (
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"

	"github.com/awaken-dev/awaken/pkg/auditchain"
)

// Audit configures the audit trail (docs/security.md, "The audit trail"). Every audit
// record is hash-chained whether or not a key is set; with a key each is also signed.
type Audit struct {
	// SigningKeyFile is a file holding the Ed25519 private key that signs every audit
	// record: a hex seed (`awaken audit keygen`), a hex 64-byte key or a PKCS #8 PEM block.
	// A relative path resolves against the configuration file's directory.
	SigningKeyFile string `yaml:"signing_key_file"`
	// SigningKey is the same key inline (hex seed or hex key). Prefer the file: a key in
	// the configuration travels wherever the configuration does.
	SigningKey string `yaml:"signing_key"`
}

// Signing reports whether a signing key is configured.
func (a Audit) Signing() bool { return a.SigningKeyFile != "" || a.SigningKey != "" }

func (a Audit) validate() error {
	if a.SigningKeyFile != "" && a.SigningKey != "" {
		return &FieldError{"audit.signing_key", "set either audit.signing_key or audit.signing_key_file, not both"}
	}
	return nil
}

// AuditSigningKey reads the configured audit signing key: nil and no error when none is
// configured; a *FieldError naming the entry (audit.signing_key_file or
// audit.signing_key) when one is configured but missing, unreadable or not an Ed25519 key.
// Every service calls it before it starts, so a process whose key is gone refuses to start
// instead of writing an unsigned trail.
func (c *Config) AuditSigningKey() (ed25519.PrivateKey, error) {
	a := c.Audit
	switch {
	case a.SigningKey != "":
		k, err := auditchain.ParsePrivateKey([]byte(a.SigningKey))
		if err != nil {
			return nil, &FieldError{"audit.signing_key", err.Error()}
		}
		return k, nil
	case a.SigningKeyFile != "":
		path := a.SigningKeyFile
		if !filepath.IsAbs(path) && c.Dir != "" {
			path = filepath.Join(c.Dir, path)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, &FieldError{"audit.signing_key_file", fmt.Sprintf("cannot read the signing key: %v", err)}
		}
		k, err := auditchain.ParsePrivateKey(data)
		if err != nil {
			return nil, &FieldError{"audit.signing_key_file", fmt.Sprintf("%s: %v", path, err)}
		}
		return k, nil
	}
	return nil, nil
}
