package auditchain

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Query selects audit records of one stream.
type Query struct {
	// Subject filters the records (a run's subject, or a wildcard such as awaken.audit.>).
	Subject string
	// FromSeq and ToSeq bound the stream sequences (0: unbounded).
	FromSeq, ToSeq uint64
	// Since and Until bound the stored times (zero: unbounded).
	Since, Until time.Time
}

// fetchBatch is how many records one pull asks for at most.
const fetchBatch = 256

// Read returns the records of stream that q selects, in stream order. It reads through an
// ordered consumer, so it needs no durable state and leaves none behind.
func Read(ctx context.Context, js jetstream.JetStream, stream string, q Query) ([]Record, error) {
	if q.Subject == "" {
		return nil, errors.New("auditchain: read needs a subject filter")
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{q.Subject}, DeliverPolicy: jetstream.DeliverAllPolicy}
	switch {
	case q.FromSeq > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, q.FromSeq
	case !q.Since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &q.Since
	}
	cons, err := js.OrderedConsumer(ctx, stream, cfg)
	if err != nil {
		return nil, fmt.Errorf("auditchain: read %s of %s: %w", q.Subject, stream, err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("auditchain: read %s of %s: %w", q.Subject, stream, err)
	}
	var out []Record
	if info.NumPending == 0 {
		return out, nil
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(fetchBatch))
	if err != nil {
		return nil, fmt.Errorf("auditchain: read %s of %s: %w", q.Subject, stream, err)
	}
	defer it.Stop()
	for {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return nil, fmt.Errorf("auditchain: read %s of %s: %w", q.Subject, stream, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return nil, fmt.Errorf("auditchain: read %s of %s: %w", q.Subject, stream, err)
		}
		seq := md.Sequence.Stream
		if (q.ToSeq > 0 && seq > q.ToSeq) || (!q.Until.IsZero() && md.Timestamp.After(q.Until)) {
			return out, nil
		}
		out = append(out, Record{Seq: seq, Subject: m.Subject(), Time: md.Timestamp, Header: m.Headers(), Data: m.Data()})
		if md.NumPending == 0 {
			return out, nil
		}
	}
}

// ExportFormat names the JSON-lines format [Export] writes. [ReadExportFile] also reads
// exportFormatV1, the format before exports carried checkpoints.
const ExportFormat = "awaken-audit-export-v2"

const exportFormatV1 = "awaken-audit-export-v1"

// exportKey is the first line of an export.
type exportKey struct {
	Format    string `json:"format"`
	Canonical string `json:"canonical"`
	PublicKey string `json:"public_key,omitempty"` // hex Ed25519 public key
	KeyID     string `json:"key_id,omitempty"`
	// CheckpointSubject is the subject of the checkpoint chain, so a verifier tells the
	// checkpoints among the records from the chains they name.
	CheckpointSubject string `json:"checkpoint_subject,omitempty"`
}

// exportRecord is one record line of an export.
type exportRecord struct {
	// Checkpoint marks a checkpoint the export starts from: a record of the checkpoint
	// chain outside the exported records, carried so the chains the export cuts verify
	// from it. Every such line comes before the first record line.
	Checkpoint bool                `json:"checkpoint,omitempty"`
	Seq        uint64              `json:"seq"`
	Subject    string              `json:"subject"`
	Time       time.Time           `json:"time"`
	Headers    map[string][]string `json:"headers"`
	// DataBase64 is the data exactly as stored: what the hash covers.
	DataBase64 []byte `json:"data_base64"`
	// Data is the same data as JSON, for reading; a verifier uses DataBase64.
	Data json.RawMessage `json:"data,omitempty"`
}

// ExportOptions says what an export carries besides its records.
type ExportOptions struct {
	// PublicKey is named in the header (nil: none). A verifier checks it against a key it
	// trusts, never takes it from the file.
	PublicKey ed25519.PublicKey
	// CheckpointSubject is the checkpoint chain's subject, named in the header.
	CheckpointSubject string
	// Checkpoints are the checkpoint records the export starts from, written before the
	// records: those that link the chains the records start past their first record (see
	// [AnchorCut]).
	Checkpoints []Record
}

// ExportFile is what [ReadExportFile] read.
type ExportFile struct {
	Format            string
	PublicKey         ed25519.PublicKey // nil when the export names none
	CheckpointSubject string            // empty in an export of the first format
	Checkpoints       []Record          // the checkpoint lines
	Records           []Record
}

// Export writes records as JSON lines with the public key pub names (nil: none); see
// [ExportWith].
func Export(w io.Writer, records []Record, pub ed25519.PublicKey) error {
	return ExportWith(w, records, ExportOptions{PublicKey: pub})
}

// ExportWith writes records as JSON lines: first a line naming the format, the canonical
// encoding, the public key and the checkpoint subject, then one line per checkpoint the
// export starts from ("checkpoint": true), then one line per record, each with its stream
// sequence, subject, stored time, every header and its data, which is all [Verify] and
// [AnchorCut] need.
func ExportWith(w io.Writer, records []Record, opts ExportOptions) error {
	enc := json.NewEncoder(w)
	k := exportKey{Format: ExportFormat, Canonical: canonicalVersion, CheckpointSubject: opts.CheckpointSubject}
	if opts.PublicKey != nil {
		k.PublicKey, k.KeyID = hex.EncodeToString(opts.PublicKey), KeyID(opts.PublicKey)
	}
	if err := enc.Encode(k); err != nil {
		return fmt.Errorf("auditchain: export: %w", err)
	}
	line := func(r Record, checkpoint bool) error {
		l := exportRecord{Checkpoint: checkpoint, Seq: r.Seq, Subject: r.Subject, Time: r.Time.UTC(), Headers: r.Header, DataBase64: r.Data}
		if json.Valid(r.Data) {
			l.Data = r.Data
		}
		if err := enc.Encode(l); err != nil {
			return fmt.Errorf("auditchain: export: %w", err)
		}
		return nil
	}
	for _, r := range opts.Checkpoints {
		if err := line(r, true); err != nil {
			return err
		}
	}
	for _, r := range records {
		if err := line(r, false); err != nil {
			return err
		}
	}
	return nil
}

// ReadExport reads what [Export] wrote: the records and the public key it names (nil if
// none), without the checkpoints it carries ([ReadExportFile] has them). A verifier should
// check that key against one it trusts, not take it from the file.
func ReadExport(r io.Reader) ([]Record, ed25519.PublicKey, error) {
	f, err := ReadExportFile(r)
	if err != nil {
		return nil, nil, err
	}
	return f.Records, f.PublicKey, nil
}

// ReadExportFile reads what [ExportWith] wrote, or an export of the first format (no
// checkpoint subject, no checkpoint lines). A checkpoint line after a record line is an
// error: an export names the checkpoints it starts from first.
func ReadExportFile(r io.Reader) (*ExportFile, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 64*1024*1024)
	if !sc.Scan() {
		return nil, fmt.Errorf("auditchain: read export: empty: %w", errOr(sc.Err(), io.ErrUnexpectedEOF))
	}
	var k exportKey
	if err := json.Unmarshal(sc.Bytes(), &k); err != nil || (k.Format != ExportFormat && k.Format != exportFormatV1) {
		return nil, fmt.Errorf("auditchain: read export: first line is not an %s (or %s) header", ExportFormat, exportFormatV1)
	}
	f := &ExportFile{Format: k.Format, CheckpointSubject: k.CheckpointSubject}
	if k.PublicKey != "" {
		b, err := hex.DecodeString(k.PublicKey)
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("auditchain: read export: public key %q is not a hex Ed25519 key", k.PublicKey)
		}
		f.PublicKey = b
	}
	for line := 2; sc.Scan(); line++ {
		var e exportRecord
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("auditchain: read export: line %d: %w", line, err)
		}
		r := Record{Seq: e.Seq, Subject: e.Subject, Time: e.Time, Header: nats.Header(e.Headers), Data: e.DataBase64}
		switch {
		case e.Checkpoint && len(f.Records) > 0:
			return nil, fmt.Errorf("auditchain: read export: line %d: a checkpoint line after the records", line)
		case e.Checkpoint:
			f.Checkpoints = append(f.Checkpoints, r)
		default:
			f.Records = append(f.Records, r)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("auditchain: read export: %w", err)
	}
	return f, nil
}

func errOr(err, alt error) error {
	if err != nil {
		return err
	}
	return alt
}

// ParsePublicKey reads a hex Ed25519 public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("auditchain: %q is not a hex Ed25519 public key (%d bytes)", s, ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}
