package auditchain

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
)

// ErrBadKey: key material is not an Ed25519 private key in a form [ParsePrivateKey] reads.
var ErrBadKey = errors.New("auditchain: not an Ed25519 private key")

// ParsePrivateKey reads an Ed25519 private key: a hex seed (64 hex digits, what
// `awaken audit keygen` writes), a hex private key (128 hex digits: seed then public key),
// or a PEM "PRIVATE KEY" block (PKCS #8, what `openssl genpkey -algorithm ed25519` writes).
// Surrounding white space is ignored.
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	data = bytes.TrimSpace(data)
	if blk, _ := pem.Decode(data); blk != nil {
		k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: PEM: %w", ErrBadKey, err)
		}
		ek, ok := k.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%w: PEM holds a %T", ErrBadKey, k)
		}
		return ek, nil
	}
	b, err := hex.DecodeString(string(data))
	if err != nil {
		return nil, fmt.Errorf("%w: neither PEM nor hex", ErrBadKey)
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if !bytes.Equal(k[ed25519.SeedSize:], b[ed25519.SeedSize:]) {
			return nil, fmt.Errorf("%w: its public half does not match its seed", ErrBadKey)
		}
		return k, nil
	}
	return nil, fmt.Errorf("%w: %d bytes, want a %d-byte seed or a %d-byte key", ErrBadKey, len(b), ed25519.SeedSize, ed25519.PrivateKeySize)
}

// GenerateKey returns a new private key and its seed in hex, the form a key file holds.
func GenerateKey() (ed25519.PrivateKey, string, error) {
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", fmt.Errorf("auditchain: generate key: %w", err)
	}
	return k, hex.EncodeToString(k.Seed()), nil
}
