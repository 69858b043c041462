package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/auditchain"
)

const auditUsage = `usage:
  awaken audit verify [--run R | --since T --until T | --from-seq N --to-seq M | --file EXPORT.jsonl] [--public-key HEX | --config FILE]
  awaken audit export [--run R | --since T --until T | --from-seq N --to-seq M] --format jsonl [--out FILE] [--public-key HEX | --config FILE]
  awaken audit keygen --out FILE
  awaken audit key [--config FILE]`

// EnvAuditPublicKey names the trusted public key of `awaken audit verify` and `export`.
const EnvAuditPublicKey = "AWAKEN_AUDIT_PUBLIC_KEY"

// auditSelection is the records a verify or export reads: a run, a time range or a
// sequence range of the audit stream.
type auditSelection struct {
	run              *string
	since, until     *time.Time
	fromSeq, toSeq   *uint64
	publicKey, cfg   *string
	connect          connectFunc
	explicitCfg, all bool
}

func selectionFlags(fs *flag.FlagSet) *auditSelection {
	s := &auditSelection{}
	s.connect = dialClient(fs)
	s.run = fs.String("run", "", "the records of this run (its whole chain, from its first record)")
	fs.Func("since", "records stored at or after T (RFC 3339, or a duration ago: 24h)", timeFlag(&s.since))
	fs.Func("until", "records stored at or before T (RFC 3339, or a duration ago)", timeFlag(&s.until))
	s.fromSeq = fs.Uint64("from-seq", 0, "records from this audit stream sequence")
	s.toSeq = fs.Uint64("to-seq", 0, "records up to this audit stream sequence")
	s.publicKey = fs.String("public-key", env(EnvAuditPublicKey, ""), "hex Ed25519 public key every record must be signed by (env "+EnvAuditPublicKey+")")
	s.cfg = fs.String("config", "", "host configuration whose audit.signing_key_file gives the public key")
	return s
}

// key is the trusted public key: --public-key, else the configuration's signing key; nil
// when neither is given.
func (s *auditSelection) key() (ed25519.PublicKey, error) {
	if *s.publicKey != "" {
		return auditchain.ParsePublicKey(*s.publicKey)
	}
	if *s.cfg == "" {
		return nil, nil
	}
	cfg, err := config.Load(*s.cfg)
	if err != nil {
		return nil, err
	}
	k, err := cfg.AuditSigningKey()
	if err != nil || k == nil {
		if err == nil {
			err = fmt.Errorf("%s configures no audit.signing_key_file", *s.cfg)
		}
		return nil, err
	}
	return k.Public().(ed25519.PublicKey), nil
}

// query is the selection as an auditchain query, and whether it starts each chain at its
// first record (a run does; a range takes its first record of each subject as the anchor).
func (s *auditSelection) query(prefix string) (auditchain.Query, bool, error) {
	q := auditchain.Query{Subject: prefix + ">", FromSeq: *s.fromSeq, ToSeq: *s.toSeq}
	if s.since != nil {
		q.Since = *s.since
	}
	if s.until != nil {
		q.Until = *s.until
	}
	ranged := q.FromSeq > 0 || q.ToSeq > 0 || s.since != nil || s.until != nil
	if *s.run != "" {
		if ranged {
			return q, false, &usageError{"--run selects a whole chain: it takes no --since/--until/--from-seq/--to-seq"}
		}
		q.Subject = prefix + *s.run
	}
	return q, q.FromSeq <= 1 && s.since == nil, nil
}

// read connects and reads the selected records and, for a run when withCalls, the audit
// heads its finalized batches anchored and its call records, both read before the audit
// records: an anchor or a decision is named only if the chain read after them lacks it.
// A selection from each chain's start also reads where the stream starts (runAudit).
func (s *auditSelection) read(ctx context.Context, withCalls bool) (runAudit, error) {
	c, ctx, done, err := s.connect(ctx)
	if err != nil {
		return runAudit{}, err
	}
	defer done()
	q, fromStart, err := s.query(auditlog.SubjectPrefix(c.Names()))
	if err != nil {
		return runAudit{}, err
	}
	out := runAudit{fromStart: fromStart, checkpointSubject: c.Names().AuditCheckpointSubject()}
	if withCalls && *s.run != "" {
		// The anchors first too: a batch finalized after they were read anchors nothing the
		// chain read after them could lack.
		if out.anchors, err = readRunAnchors(ctx, c.js, c.Names(), *s.run); err != nil {
			return runAudit{}, err
		}
		if out.calls, err = readRunCalls(ctx, c.js, c.Names(), *s.run); err != nil {
			return runAudit{}, err
		}
	}
	if fromStart {
		// Read before the records: a prune after this read only moves the start further on.
		stream, err := c.js.Stream(ctx, c.Names().AuditStream())
		if err != nil {
			return runAudit{}, fmt.Errorf("audit stream: %w", err)
		}
		st := stream.CachedInfo().State
		if st.FirstSeq > 1 && st.NumDeleted == 0 {
			out.prunedBefore, out.prunedAt = st.FirstSeq, st.FirstTime
		}
	}
	out.recs, err = auditchain.Read(ctx, c.js, c.Names().AuditStream(), q)
	return out, err
}

// runAudit is what a verify reads: the selected audit records, whether each chain starts
// at its first record and, for a run, its call records and its batches' audit anchors.
type runAudit struct {
	recs      []auditchain.Record
	calls     []runCall
	anchors   []batchAnchor
	fromStart bool
	// prunedBefore is the audit stream's first sequence when records before it were
	// removed from its head only (retention's max_age, or a purge up to a sequence) and
	// none inside it: a chain whose first remaining record is not its first started before
	// it, so it is verified from that record. 0: nothing was removed from the head, or a
	// record inside the stream was deleted too, and every chain must start at n 1.
	prunedBefore uint64
	prunedAt     time.Time
	// checkpointSubject holds the signed checkpoints of the chains' heads: a pruned chain
	// one of them links to is verified from it.
	checkpointSubject string
}

func auditVerifyCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout, stderr := io.stdout, io.stderr
	sel := selectionFlags(fs)
	file := fs.String("file", "", "verify this export (awaken audit export) instead of the stream")
	asJSON := jsonFlag(fs, stdout)
	return func(ctx context.Context, _ []string) error {
		if fs.NArg() != 0 {
			return &usageError{auditUsage}
		}
		pub, err := sel.key()
		if err != nil {
			return err
		}
		var recs []auditchain.Record
		var calls []runCall
		var anchors []batchAnchor
		fromStart := false
		var prunedBefore uint64
		var prunedAt time.Time
		var cpSubject string
		if *file != "" {
			f, err := os.Open(*file)
			if err != nil {
				return err
			}
			defer f.Close()
			var exported ed25519.PublicKey
			if recs, exported, err = auditchain.ReadExport(f); err != nil {
				return err
			}
			if pub != nil && exported != nil && !pub.Equal(exported) {
				fmt.Fprintf(stderr, "awaken audit verify: the export names key %s; checking against the trusted key %s\n", auditchain.KeyID(exported), auditchain.KeyID(pub))
			}
		} else {
			ra, err := sel.read(ctx, true)
			if err != nil {
				return err
			}
			recs, calls, anchors, fromStart, cpSubject = ra.recs, ra.calls, ra.anchors, ra.fromStart, ra.checkpointSubject
			if prunedBefore, prunedAt = ra.prunedBefore, ra.prunedAt; prunedBefore > 0 {
				fromStart = false
				fmt.Fprintf(stderr, "awaken audit verify: the audit stream starts at seq %d (stored %s): the records before it were removed from its head (retention max_age, or a purge), none inside it; a chain that started before it is verified from the signed checkpoint that names its head, else from its first remaining record\n",
					prunedBefore, prunedAt.UTC().Format(time.RFC3339))
			}
		}
		if len(recs) == 0 && *sel.run != "" {
			// A run's chain that is not there is not a verified one: it was never written, or it
			// was purged whole, which no chain can show (docs/security.md).
			return fmt.Errorf("no audit records of run %s: nothing to verify", *sel.run)
		}
		if pub == nil {
			fmt.Fprintln(stderr, "awaken audit verify: no --public-key (or --config with a signing key): checking the hash chain only, not the signatures")
		}
		sum, err := auditchain.Verify(recs, auditchain.VerifyOptions{PublicKey: pub, FromStart: fromStart})
		var be *auditchain.BreakError
		if errors.As(err, &be) {
			if *asJSON {
				_ = printJSON(stdout, map[string]any{"ok": false, "break": be, "error": be.Error()})
			}
			return fmt.Errorf("the audit trail is broken at stream seq %d (subject %s, n %d): %s: %s", be.Seq, be.Subject, be.N, be.Reason, be.Detail)
		}
		if err != nil {
			return err
		}
		// A chain pruned from its head verifies from the latest signed checkpoint that names
		// its head at or just before its first remaining record; a checkpoint its records
		// contradict breaks the trail.
		var fromCheckpoint map[string]auditchain.CheckpointRef
		if prunedBefore > 0 {
			fromCheckpoint, err = auditchain.Anchor(recs, cpSubject)
			if errors.As(err, &be) {
				if *asJSON {
					_ = printJSON(stdout, map[string]any{"ok": false, "break": be, "error": be.Error()})
				}
				return fmt.Errorf("the audit trail is broken at stream seq %d (checkpoint on %s, n %d): %s: %s", be.Seq, be.Subject, be.N, be.Reason, be.Detail)
			}
			if err != nil {
				return err
			}
		}
		// A run's chain must still reach the head each of its finalized batches recorded: a
		// chain whose last records were deleted verifies link by link, the anchor shows it.
		// And it is checked against the run's call records: a decision they hold whose record
		// the chain lacks (never stored, or cut off at the chain's end, which no link shows)
		// is named. Both are reported, since a cut tail usually takes decisions with it.
		cut := truncatedTail(recs, anchors)
		missing, err := unauditedDecisions(recs, calls)
		if err != nil {
			return err
		}
		if len(cut) > 0 || len(missing) > 0 {
			var errs []error
			out := map[string]any{"ok": false}
			if len(cut) > 0 {
				out["truncated"] = cut
				errs = append(errs, fmt.Errorf("%w: %s", ErrTailTruncated, strings.Join(cut, "; ")))
			}
			if len(missing) > 0 {
				out["unaudited"] = missing
				errs = append(errs, fmt.Errorf("%w: %s", ErrDecisionUnaudited, strings.Join(missing, "; ")))
			}
			incomplete := errors.Join(errs...)
			if *asJSON {
				out["error"] = incomplete.Error()
				_ = printJSON(stdout, out)
			}
			return fmt.Errorf("the audit trail of run %s is incomplete: %w", *sel.run, incomplete)
		}
		if *asJSON {
			out := map[string]any{"ok": true, "records": sum.Records, "subjects": sum.Subjects, "signed": sum.Signed, "key_id": sum.KeyID, "last": sum.Last, "first": sum.First}
			if prunedBefore > 0 {
				out["pruned_before_seq"], out["pruned_at"] = prunedBefore, prunedAt.UTC()
				out["from_checkpoint"] = fromCheckpoint
			}
			if calls != nil {
				out["call_records"] = len(calls)
			}
			if anchors != nil {
				out["batch_anchors"] = len(anchors)
			}
			return printJSON(stdout, out)
		}
		signed := "signatures not checked"
		if sum.Signed {
			signed = "every record signed by key " + sum.KeyID
		}
		fmt.Fprintf(stdout, "audit trail verified: %d records on %d subjects, %s\n", sum.Records, sum.Subjects, signed)
		if prunedBefore > 0 {
			fmt.Fprintf(stdout, "verified from stream seq %d (stored %s): the records before it were pruned\n", prunedBefore, prunedAt.UTC().Format(time.RFC3339))
			for _, ref := range checkpointsUsed(fromCheckpoint) {
				fmt.Fprintf(stdout, "verified from checkpoint at %s (seq %d)\n", ref.Time.UTC().Format(time.RFC3339), ref.Seq)
			}
		}
		subjects := make([]string, 0, len(sum.Last))
		for s := range sum.Last {
			subjects = append(subjects, s)
		}
		sort.Strings(subjects)
		for _, s := range subjects {
			l := sum.Last[s]
			from := ""
			if f := sum.First[s]; f > 1 {
				from = fmt.Sprintf("from n %d, ", f)
				if ref, ok := fromCheckpoint[s]; ok {
					from = fmt.Sprintf("from n %d (checkpoint seq %d names n %d), ", f, ref.Seq, ref.N)
				} else if prunedBefore > 0 && s != cpSubject {
					from = fmt.Sprintf("from n %d (no checkpoint names its head), ", f)
				}
			}
			fmt.Fprintf(stdout, "  %s: %slast n %d hash %s\n", s, from, l.N, l.Hash)
		}
		if calls != nil {
			fmt.Fprintf(stdout, "every decision of the run's %d call records has its audit record\n", len(calls))
		}
		if len(anchors) > 0 {
			fmt.Fprintf(stdout, "the chain reaches the audit head each of the run's %d finalized batches recorded\n", len(anchors))
		}
		return nil
	}
}

func auditExportCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout := io.stdout
	sel := selectionFlags(fs)
	format := fs.String("format", "jsonl", "output format: jsonl")
	out := fs.String("out", "", "write to FILE instead of standard output")
	return func(ctx context.Context, _ []string) error {
		if fs.NArg() != 0 || *format != "jsonl" {
			return &usageError{auditUsage}
		}
		pub, err := sel.key()
		if err != nil {
			return err
		}
		ra, err := sel.read(ctx, false)
		if err != nil {
			return err
		}
		recs := ra.recs
		w := stdout
		if *out != "" {
			f, err := os.Create(*out)
			if err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		return auditchain.Export(w, recs, pub)
	}
}

func auditKeygenCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout := io.stdout
	out := fs.String("out", "", "write the new private key (hex seed, mode 0600) to FILE; it must not exist")
	return func(context.Context, []string) error {
		if *out == "" || fs.NArg() != 0 {
			return &usageError{auditUsage}
		}
		k, seed, err := auditchain.GenerateKey()
		if err != nil {
			return err
		}
		if err := writeKeyFile(*out, seed); err != nil {
			return err
		}
		pub := k.Public().(ed25519.PublicKey)
		fmt.Fprintf(stdout, "wrote %s (audit.signing_key_file)\npublic key %s (key id %s)\n", *out, hex.EncodeToString(pub), auditchain.KeyID(pub))
		return nil
	}
}

// writeKeyFile writes a new key file readable by its owner only, refusing to replace one:
// losing a signing key by a mistyped keygen would orphan every record it signed.
func writeKeyFile(path, seed string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("audit key: %w", err)
	}
	if _, err := f.WriteString(seed + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("audit key: %w", err)
	}
	return f.Close()
}

func auditKeyCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout := io.stdout
	cfgPath := fs.String("config", defaultConfigPath(), "host configuration file (YAML or JSON)")
	return func(context.Context, []string) error {
		cfg, err := config.Load(*cfgPath)
		if err != nil {
			return err
		}
		k, err := cfg.AuditSigningKey()
		if err != nil {
			return err
		}
		if k == nil {
			return fmt.Errorf("%s configures no audit.signing_key_file: the trail is hash-chained but unsigned", *cfgPath)
		}
		pub := k.Public().(ed25519.PublicKey)
		fmt.Fprintf(stdout, "%s key id %s\n", hex.EncodeToString(pub), auditchain.KeyID(pub))
		return nil
	}
}

// DevAuditKeyFile is the signing key `awaken dev` makes once in its data directory.
const DevAuditKeyFile = "audit-signing.key"

// devAuditKey signs the dev trail with DATA/audit-signing.key when the configuration names
// no key: made on the first start, reused after, so one data directory keeps one chain of
// one key. A configuration that names a key keeps it.
func devAuditKey(cfg *config.Config, dataDir string) error {
	if cfg.Audit.Signing() {
		return nil
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("dev audit key: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(dataDir, DevAuditKeyFile))
	if err != nil {
		return fmt.Errorf("dev audit key: %w", err)
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		_, seed, err := auditchain.GenerateKey()
		if err != nil {
			return err
		}
		if err := writeKeyFile(path, seed); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	}
	cfg.Audit.SigningKeyFile = path
	return nil
}

// checkpointsUsed is the distinct checkpoints of refs, in stream order.
func checkpointsUsed(refs map[string]auditchain.CheckpointRef) []auditchain.CheckpointRef {
	bySeq := map[uint64]auditchain.CheckpointRef{}
	for _, r := range refs {
		bySeq[r.Seq] = auditchain.CheckpointRef{Seq: r.Seq, Time: r.Time}
	}
	out := make([]auditchain.CheckpointRef, 0, len(bySeq))
	for _, r := range bySeq {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}
