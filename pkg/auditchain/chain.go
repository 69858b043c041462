// Package auditchain seals and verifies awaken's tamper-evident audit trail.
//
// Every record on an audit subject (awaken.audit.{run}, awaken.audit.tools.pause,
// awaken.audit.mcp.calls) carries, in NATS headers beside its unchanged CloudEvent, its
// position in the chain of its subject, the hash of the previous record of that subject,
// its own hash and an Ed25519 signature over that hash. A chain is per subject, so runs
// never contend for one chain head and a cluster needs no single writer (docs/security.md,
// "The audit trail").
//
// [Seal] computes a record's link, [Verify] checks a sequence of records and returns a
// [*BreakError] naming the first that breaks, [Anchor] and [AnchorCut] start a chain cut
// before its first record at the signed [Checkpoint] naming its head, [Read] reads records
// from the audit stream and [ExportWith] writes them as JSON lines with what a verifier
// needs, the checkpoints they start from included ([ReadExportFile] reads them back).
package auditchain

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
)

// The chain headers of an audit record.
const (
	HeaderN    = "Awaken-Audit-N"    // position in the subject's chain, 1-based
	HeaderPrev = "Awaken-Audit-Prev" // hex SHA-256 of the previous record; ZeroHash for the first
	HeaderHash = "Awaken-Audit-Hash" // hex SHA-256 of this record's canonical bytes
	HeaderSig  = "Awaken-Audit-Sig"  // hex Ed25519 signature over the hash bytes; absent when unsigned
	HeaderKey  = "Awaken-Audit-Key"  // id of the signing key ([KeyID]); absent when unsigned
)

// ZeroHash is the Prev of the first record of a chain.
var ZeroHash = hex.EncodeToString(make([]byte, sha256.Size))

// canonicalVersion is the domain separator of the canonical encoding: a hash of this
// scheme can never equal the hash of another message that happens to share the bytes.
const canonicalVersion = "awaken-audit-v1"

// The CloudEvent headers the hash covers (binary content mode, pkg/cloudevent).
const (
	ceID          = "ce-id"
	ceType        = "ce-type"
	ceSource      = "ce-source"
	ceTime        = "ce-time"
	ceContentType = "ce-datacontenttype"
)

// Link is the chain part of one record.
type Link struct {
	N    uint64 `json:"n"`
	Prev string `json:"prev"`          // hex
	Hash string `json:"hash"`          // hex
	Sig  string `json:"sig,omitempty"` // hex, empty when unsigned
	Key  string `json:"key,omitempty"` // key id, empty when unsigned
}

// KeyID is the id of an Ed25519 public key: the hex of its first 8 bytes.
func KeyID(pub ed25519.PublicKey) string {
	if len(pub) < 8 {
		return ""
	}
	return hex.EncodeToString(pub[:8])
}

// Hash is the SHA-256 of the canonical encoding of a record: the version tag, then the
// subject, N, prev, the CloudEvent id, type, source, time and data content type (from h)
// and the data, each as an 8-byte big-endian length followed by its bytes. Length
// prefixes make the encoding unambiguous: no two different records encode alike.
func Hash(subject string, n uint64, prev string, h nats.Header, data []byte) [sha256.Size]byte {
	d := sha256.New()
	field := func(b []byte) {
		var l [8]byte
		binary.BigEndian.PutUint64(l[:], uint64(len(b)))
		d.Write(l[:])
		d.Write(b)
	}
	field([]byte(canonicalVersion))
	field([]byte(subject))
	field([]byte(strconv.FormatUint(n, 10)))
	field([]byte(prev))
	for _, k := range []string{ceID, ceType, ceSource, ceTime, ceContentType} {
		field([]byte(h.Get(k)))
	}
	field(data)
	var sum [sha256.Size]byte
	copy(sum[:], d.Sum(nil))
	return sum
}

// Seal computes the link of msg as record n of its subject's chain after the record whose
// hash is prev (ZeroHash or "" for the first), signs it with key (nil: unsigned) and sets
// the chain headers on msg. It replaces chain headers msg already had, so a retried append
// re-seals the same message at its new position.
func Seal(msg *nats.Msg, n uint64, prev string, key ed25519.PrivateKey) Link {
	if prev == "" {
		prev = ZeroHash
	}
	if msg.Header == nil {
		msg.Header = nats.Header{}
	}
	sum := Hash(msg.Subject, n, prev, msg.Header, msg.Data)
	l := Link{N: n, Prev: prev, Hash: hex.EncodeToString(sum[:])}
	msg.Header.Set(HeaderN, strconv.FormatUint(n, 10))
	msg.Header.Set(HeaderPrev, prev)
	msg.Header.Set(HeaderHash, l.Hash)
	msg.Header.Del(HeaderSig)
	msg.Header.Del(HeaderKey)
	if key != nil {
		l.Sig = hex.EncodeToString(ed25519.Sign(key, sum[:]))
		l.Key = KeyID(key.Public().(ed25519.PublicKey))
		msg.Header.Set(HeaderSig, l.Sig)
		msg.Header.Set(HeaderKey, l.Key)
	}
	return l
}

// ErrUnchained: a message carries no (or malformed) chain headers.
var ErrUnchained = errors.New("auditchain: record is not chained")

// LinkOf reads the chain headers of h. A message without them, or with a malformed N,
// is ErrUnchained.
func LinkOf(h nats.Header) (Link, error) {
	ns := h.Get(HeaderN)
	if ns == "" {
		return Link{}, ErrUnchained
	}
	n, err := strconv.ParseUint(ns, 10, 64)
	if err != nil || n == 0 {
		return Link{}, fmt.Errorf("%w: %s %q", ErrUnchained, HeaderN, ns)
	}
	return Link{N: n, Prev: h.Get(HeaderPrev), Hash: h.Get(HeaderHash), Sig: h.Get(HeaderSig), Key: h.Get(HeaderKey)}, nil
}
