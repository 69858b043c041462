package cli

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/auditlog"
	"github.com/awaken-dev/awaken/internal/config"
	"github.com/awaken-dev/awaken/pkg/auditchain"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

const auditUsage = `usage:
  awaken audit verify [--run R | --since T --until T | --from-seq N --to-seq M | --file EXPORT.jsonl] [--public-key HEX | --config FILE] [--without-checkpoint]
  awaken audit export [--run R | --since T --until T | --from-seq N --to-seq M] --format jsonl [--out FILE] [--public-key HEX | --config FILE]
  awaken audit keygen --out FILE
  awaken audit key [--config FILE]`

// EnvAuditPublicKey names the trusted public key of `awaken audit verify` and `export`.
const EnvAuditPublicKey = "AWAKEN_AUDIT_PUBLIC_KEY"

// auditSelection is the records a verify or export reads: a run, a time range or a
// sequence range of the audit stream.
type auditSelection struct {
	run            *string
	since, until   *time.Time
	fromSeq, toSeq *uint64
	publicKey, cfg *string
	// partition is the partition whose audit stream a selection without --run reads
	// (-1: every partition, one after the other; a run's is its own).
	partition        *int
	connect          connectFunc
	explicitCfg, all bool
}

func selectionFlags(fs *flag.FlagSet) *auditSelection {
	s := &auditSelection{}
	s.connect = dialClient(fs)
	s.run = fs.String("run", "", "the records of this run (its whole chain; one pruned before its first record starts at the signed checkpoint naming its head)")
	fs.Func("since", "records stored at or after T (RFC 3339, or a duration ago: 24h)", timeFlag(&s.since))
	fs.Func("until", "records stored at or before T (RFC 3339, or a duration ago)", timeFlag(&s.until))
	s.fromSeq = fs.Uint64("from-seq", 0, "records from this audit stream sequence")
	s.toSeq = fs.Uint64("to-seq", 0, "records up to this audit stream sequence")
	s.publicKey = fs.String("public-key", env(EnvAuditPublicKey, ""), "hex Ed25519 public key every record must be signed by (env "+EnvAuditPublicKey+")")
	s.cfg = fs.String("config", "", "host configuration whose audit.signing_key_file gives the public key")
	s.partition = fs.Int("partition", -1, "without --run: the partition whose audit stream to read (default: verify every partition's; an export reads partition 0's unless given)")
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

// readPurpose says what a selection is read for: a verify also reads a run's call
// records and batch anchors; an export extends a cut range back to a checkpoint.
type readPurpose int

const (
	forVerify readPurpose = iota
	forExport
)

// read connects and reads the selected records. For a run it also reads the checkpoints
// that name its chain and, for a verify, the audit heads its finalized batches anchored
// and its call records, all before the audit records: a checkpoint, an anchor or a
// decision is named only if the chain read after them lacks it. A selection from each
// chain's start also reads where the stream starts (runAudit). An export of a range whose
// chains start past their first record is extended back to the latest checkpoint at or
// before it (rangeFromCheckpoint).
func (s *auditSelection) read(ctx context.Context, purpose readPurpose) (runAudit, error) {
	c, ctx, done, err := s.connect(ctx)
	if err != nil {
		return runAudit{}, err
	}
	defer done()
	// Each partition has its audit stream: a run's chain is in its partition's, a range is
	// read from the selected partition's.
	names := c.Names().Partition(min(max(*s.partition, 0), c.Names().PartitionCount()-1))
	if *s.run != "" {
		names = c.Names().Of(*s.run)
	}
	prefix := auditlog.SubjectPrefix(names)
	q, fromStart, err := s.query(prefix)
	if err != nil {
		return runAudit{}, err
	}
	out := runAudit{fromStart: fromStart, checkpointSubject: names.AuditCheckpointSubject()}
	run := *s.run
	if purpose == forVerify && run != "" {
		// The anchors first too: a batch finalized after they were read anchors nothing the
		// chain read after them could lack.
		if out.anchors, err = readRunAnchors(ctx, c.js, names, run); err != nil {
			return runAudit{}, err
		}
		if out.calls, err = readRunCalls(ctx, c.js, names, run); err != nil {
			return runAudit{}, err
		}
	}
	if run != "" {
		// Before the chain: a checkpoint written after this read names a head the chain read
		// after it holds, so one naming a head past the chain's end shows a cut tail.
		cps, err := auditchain.Read(ctx, c.js, names.AuditStream(), auditchain.Query{Subject: out.checkpointSubject})
		if err != nil {
			return runAudit{}, err
		}
		out.checkpoints = checkpointsNaming(cps, q.Subject)
	}
	var stream jetstream.Stream
	var st jetstream.StreamState
	if fromStart {
		// Read before the records: a prune after this read only moves the start further on.
		if stream, err = c.js.Stream(ctx, names.AuditStream()); err != nil {
			return runAudit{}, fmt.Errorf("audit stream: %w", err)
		}
		st = stream.CachedInfo().State
		if st.FirstSeq > 1 && st.NumDeleted == 0 {
			out.prunedBefore, out.prunedAt = st.FirstSeq, st.FirstTime
		}
	}
	if out.recs, err = auditchain.Read(ctx, c.js, names.AuditStream(), q); err != nil {
		return runAudit{}, err
	}
	if run != "" && fromStart && out.prunedBefore == 0 && st.FirstSeq > 1 && len(out.recs) > 0 {
		// A record deleted inside the stream is not retention, but only one of this run's
		// chain, before its first remaining record, is this run's concern: with none of
		// those, the run's missing head went with the stream's.
		if out.prunedBefore, out.prunedAt, err = prunedBeforeRecord(ctx, stream, out.recs[0].Seq); err != nil {
			return runAudit{}, err
		}
	}
	if purpose == forExport && run == "" {
		if err := out.rangeFromCheckpoint(ctx, c.js, names.AuditStream(), prefix+">"); err != nil {
			return runAudit{}, err
		}
	}
	return out, nil
}

// prunedBeforeRecord is the stream's first sequence and its time when the records removed
// before seq were all removed from the stream's head (no deleted sequence inside the stream
// lies before seq), else 0.
func prunedBeforeRecord(ctx context.Context, stream jetstream.Stream, seq uint64) (uint64, time.Time, error) {
	info, err := stream.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("audit stream: %w", err)
	}
	for _, d := range info.State.Deleted {
		if d < seq {
			return 0, time.Time{}, nil
		}
	}
	return info.State.FirstSeq, info.State.FirstTime, nil
}

// rangeFromCheckpoint makes an export of a range whose chains start past their first
// record verifiable on its own: it finds the latest checkpoint stored at or before the
// range's first record and, when checkpoints inside the range do not already link every
// chain the range cuts, carries that checkpoint and adds the records from its cut (the
// stream's last sequence when it read the heads) to the range's start, so every chain it
// names continues from the head it names. Chains still unlinked are left in uncovered.
func (ra *runAudit) rangeFromCheckpoint(ctx context.Context, js jetstream.JetStream, stream, subjects string) error {
	if len(ra.recs) == 0 {
		return nil
	}
	_, err := auditchain.AnchorCut(ra.recs, nil, ra.checkpointSubject, nil)
	var ue *auditchain.UnanchoredError
	if !errors.As(err, &ue) {
		return nil // whole, or a break that verify names
	}
	first := ra.recs[0].Seq
	cps, err := auditchain.Read(ctx, js, stream, auditchain.Query{Subject: ra.checkpointSubject, ToSeq: first})
	if err != nil {
		return err
	}
	if len(cps) == 0 {
		ra.uncovered = ue.Chains
		return nil
	}
	cp := cps[len(cps)-1]
	var at auditchain.Checkpoint
	if err := json.Unmarshal(cp.Data, &at); err != nil {
		return fmt.Errorf("checkpoint seq %d: %w", cp.Seq, err)
	}
	recs := ra.recs
	if from := at.CutSeq + 1; from < first {
		before, err := auditchain.Read(ctx, js, stream, auditchain.Query{Subject: subjects, FromSeq: from, ToSeq: first - 1})
		if err != nil {
			return err
		}
		recs = append(before, recs...)
		ra.extendedFrom = from
	}
	ra.recs = slices.DeleteFunc(recs, func(r auditchain.Record) bool { return r.Seq == cp.Seq })
	ra.carried = []auditchain.Record{cp}
	if _, err := auditchain.AnchorCut(ra.recs, ra.carried, ra.checkpointSubject, nil); errors.As(err, &ue) {
		ra.uncovered = ue.Chains
	}
	return nil
}

// checkpointsNaming is the checkpoint records of cps that name a head of subject.
func checkpointsNaming(cps []auditchain.Record, subject string) []auditchain.Record {
	var out []auditchain.Record
	for _, r := range cps {
		var cp auditchain.Checkpoint
		if json.Unmarshal(r.Data, &cp) != nil {
			out = append(out, r) // not a checkpoint: verify names it
			continue
		}
		if _, ok := cp.Heads[subject]; ok {
			out = append(out, r)
		}
	}
	return out
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
	// none inside it (for a run: none of its chain): a chain whose first remaining record is
	// not its first started before it, so it is verified from that record. 0: nothing was
	// removed from the head, or a record inside the stream was deleted too, and every chain
	// must start at n 1.
	prunedBefore uint64
	prunedAt     time.Time
	// checkpointSubject holds the signed checkpoints of the chains' heads: a pruned chain
	// one of them links to is verified from it.
	checkpointSubject string
	// checkpoints are, for a run, the checkpoint records that name its chain, read before
	// it: a run cut before its first record is verified from one of them.
	checkpoints []auditchain.Record
	// carried is, for an export of a range, the checkpoint it starts from, and extendedFrom
	// the stream sequence the export was extended back to (0: not extended); uncovered names
	// the chains no checkpoint links to (subject: first n).
	carried      []auditchain.Record
	extendedFrom uint64
	uncovered    map[string]uint64
}

// auditVerifyExamples are verify's examples (awaken audit verify -h).
const auditVerifyExamples = `  awaken audit verify --public-key HEX
      the whole stream
  awaken audit verify --run RUN --config awaken.yaml
      one run, against its call records and its batches' anchors of the chain's tail
  awaken audit verify --file audit-2026-12-05.jsonl --public-key HEX
      an export, offline, from the checkpoint it carries

A chain cut before its first record (retention pruned it, or an export's range starts
after it) is verified from the signed checkpoint that names the record before it, and the
output says which ("verified from checkpoint at T (seq S)"). --run and --file refuse a cut
chain no checkpoint links to (exit 1, "no checkpoint vouches for a cut chain") unless
--without-checkpoint.`

func auditVerifyCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout, stderr := io.stdout, io.stderr
	sel := selectionFlags(fs)
	file := fs.String("file", "", "verify this export (awaken audit export) instead of the stream, from the checkpoint it carries")
	withoutCheckpoint := fs.Bool("without-checkpoint", false, "with --run or --file: verify a chain cut before its first record from that record when no checkpoint links to it (an export made before exports carried checkpoints, a stream without max_age)")
	asJSON := jsonFlag(fs, stdout)
	once := func(ctx context.Context, _ []string) error {
		if fs.NArg() != 0 {
			return &usageError{auditUsage}
		}
		pub, err := sel.key()
		if err != nil {
			return err
		}
		var ra runAudit
		// cutMustLink: every chain cut before its first record must be linked by a checkpoint
		// (--run, --file); the whole stream's verify names the chains none links instead.
		cutMustLink := false
		if *file != "" {
			f, err := os.Open(*file)
			if err != nil {
				return err
			}
			defer f.Close()
			ef, err := auditchain.ReadExportFile(f)
			if err != nil {
				return err
			}
			if pub != nil && ef.PublicKey != nil && !pub.Equal(ef.PublicKey) {
				fmt.Fprintf(stderr, "awaken audit verify: the export names key %s; checking against the trusted key %s\n", auditchain.KeyID(ef.PublicKey), auditchain.KeyID(pub))
			}
			ra = runAudit{recs: ef.Records, checkpoints: ef.Checkpoints, checkpointSubject: ef.CheckpointSubject}
			if ra.checkpointSubject == "" { // an export of the first format
				ra.checkpointSubject = contracts.NewNames(fs.Lookup("prefix").Value.String()).AuditCheckpointSubject()
			}
			cutMustLink = true
		} else {
			if ra, err = sel.read(ctx, forVerify); err != nil {
				return err
			}
			if ra.prunedBefore > 0 {
				ra.fromStart = false
				inside := "none inside it"
				if *sel.run != "" {
					inside = "none of the run's inside it"
				}
				fmt.Fprintf(stderr, "awaken audit verify: the audit stream starts at seq %d (stored %s): the records before it were removed from its head (retention max_age, or a purge), %s; a chain that started before it is verified from the signed checkpoint that names its head\n",
					ra.prunedBefore, ra.prunedAt.UTC().Format(time.RFC3339), inside)
			}
			cutMustLink = *sel.run != "" && ra.prunedBefore > 0
		}
		recs, calls, anchors, cpSubject, prunedBefore := ra.recs, ra.calls, ra.anchors, ra.checkpointSubject, ra.prunedBefore
		if len(recs) == 0 && *sel.run != "" {
			// A run's chain that is not there is not a verified one: it was never written, or it
			// was purged whole, which no chain can show (docs/security.md).
			return fmt.Errorf("no audit records of run %s: nothing to verify", *sel.run)
		}
		if pub == nil {
			fmt.Fprintln(stderr, "awaken audit verify: no --public-key (or --config with a signing key): checking the hash chain only, not the signatures")
		}
		broken := func(be *auditchain.BreakError, where string) error {
			if *asJSON {
				_ = printJSON(stdout, map[string]any{"ok": false, "break": be, "error": be.Error()})
			}
			return &wrapped{fmt.Sprintf("the audit trail is broken at stream seq %d (%s %s, n %d): %s: %s", be.Seq, where, be.Subject, be.N, be.Reason, be.Detail), be}
		}
		sum, err := auditchain.Verify(recs, auditchain.VerifyOptions{PublicKey: pub, FromStart: ra.fromStart})
		var be *auditchain.BreakError
		if errors.As(err, &be) {
			return broken(be, "subject")
		}
		if err != nil {
			return err
		}
		// A chain cut before its first record verifies from the latest signed checkpoint that
		// names the record before it, or one of its records; a checkpoint its records
		// contradict breaks the trail. --run and --file need one for every cut chain: what
		// they verify has no other witness of where a chain started.
		var fromCheckpoint map[string]auditchain.CheckpointRef
		var unlinked map[string]uint64
		if prunedBefore > 0 || cutMustLink {
			fromCheckpoint, err = auditchain.AnchorCut(recs, ra.checkpoints, cpSubject, pub)
			var ue *auditchain.UnanchoredError
			switch {
			case errors.As(err, &be):
				return broken(be, "checkpoint on")
			case errors.As(err, &ue) && cutMustLink && !*withoutCheckpoint:
				if *asJSON {
					_ = printJSON(stdout, map[string]any{"ok": false, "unanchored": ue.Chains, "error": ue.Error()})
				}
				return fmt.Errorf("the audit trail cannot be verified from where it starts: %w", ue)
			case errors.As(err, &ue):
				unlinked = ue.Chains
			case err != nil:
				return err
			}
		}
		// A run's chain must still reach the head each of its finalized batches recorded: a
		// chain whose last records were deleted verifies link by link, the anchor shows it.
		// And it is checked against the run's call records: a decision they hold whose record
		// the chain lacks (never stored, or cut off at the chain's end, which no link shows)
		// is named. Both are reported, since a cut tail usually takes decisions with it. A
		// chain pruned before its first record answers for nothing before it: anchors below
		// it, and decisions dated before its first record, went with the pruned records.
		var runFrom uint64
		var runFromTime time.Time
		if *sel.run != "" && len(recs) > 0 {
			runFrom, runFromTime = sum.First[recs[0].Subject], recs[0].Time
		}
		cut := truncatedTail(recs, anchors, runFrom)
		missing, pruned, err := unauditedDecisions(recs, calls, runFrom, runFromTime)
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
				out["pruned_before_seq"], out["pruned_at"] = prunedBefore, ra.prunedAt.UTC()
			}
			if len(fromCheckpoint) > 0 {
				out["from_checkpoint"] = fromCheckpoint
			}
			if len(unlinked) > 0 {
				out["unanchored"] = unlinked
			}
			if calls != nil {
				out["call_records"] = len(calls)
				out["pruned_decisions"] = pruned
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
			fmt.Fprintf(stdout, "verified from stream seq %d (stored %s): the records before it were pruned\n", prunedBefore, ra.prunedAt.UTC().Format(time.RFC3339))
		}
		for _, ref := range checkpointsUsed(fromCheckpoint) {
			fmt.Fprintf(stdout, "verified from checkpoint at %s (seq %d)\n", ref.Time.UTC().Format(time.RFC3339), ref.Seq)
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
					from = fmt.Sprintf("from n %d (checkpoint seq %d names n %d hash %s), ", f, ref.Seq, ref.N, ref.Hash)
				} else if _, ok := unlinked[s]; ok {
					from = fmt.Sprintf("from n %d (no checkpoint names its head), ", f)
				}
			}
			fmt.Fprintf(stdout, "  %s: %slast n %d hash %s\n", s, from, l.N, l.Hash)
		}
		if calls != nil {
			fmt.Fprintf(stdout, "every decision of the run's %d call records has its audit record", len(calls))
			if pruned > 0 {
				fmt.Fprintf(stdout, ", or is dated before the chain's first remaining record (%d, pruned with the records before it)", pruned)
			}
			fmt.Fprintln(stdout)
		}
		if len(anchors) > 0 {
			before := 0
			for _, a := range anchors {
				if a.head.N < runFrom {
					before++
				}
			}
			fmt.Fprintf(stdout, "the chain reaches the audit head each of the run's %d finalized batches recorded", len(anchors)-before)
			if before > 0 {
				fmt.Fprintf(stdout, " (%d more anchored it before its first remaining record, pruned with the records before it)", before)
			}
			fmt.Fprintln(stdout)
		}
		return nil
	}
	// The whole trail of a deployment with several partitions is every partition's audit
	// stream: each is verified in turn, and the first broken one fails the verify.
	return func(ctx context.Context, args []string) error {
		if *sel.run != "" || *file != "" || *sel.partition >= 0 {
			return once(ctx, args)
		}
		c, _, done, err := sel.connect(ctx)
		if err != nil {
			return err
		}
		parts := c.Names().PartitionCount()
		done()
		if parts == 1 {
			return once(ctx, args)
		}
		defer func() { *sel.partition = -1 }()
		for k := range parts {
			*sel.partition = k
			fmt.Fprintf(stdout, "partition %d (%s):\n", k, c.Names().Partition(k).AuditStream())
			if err := once(ctx, args); err != nil {
				return fmt.Errorf("partition %d: %w", k, err)
			}
		}
		return nil
	}
}

// wrapped is an error whose message already says what err does: errors.Is and As reach
// err without its text repeated.
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// startsOf names where each cut chain starts, in subject order.
func startsOf(chains map[string]uint64) string {
	subjects := make([]string, 0, len(chains))
	for s := range chains {
		subjects = append(subjects, s)
	}
	sort.Strings(subjects)
	for i, s := range subjects {
		subjects[i] = fmt.Sprintf("%s starts at n %d", s, chains[s])
	}
	return strings.Join(subjects, ", ")
}

// auditExportExamples are export's examples (awaken audit export -h).
const auditExportExamples = `  awaken audit export --run RUN --format jsonl --out run.jsonl
      one run's chain
  awaken audit export --since 48h --until 24h --format jsonl --out audit-$(date +%F).jsonl
      a day of the whole trail, to archive before retention prunes it

An export whose chains start past their first record carries, first, the signed
checkpoint they continue from (a range is extended back to the latest checkpoint's cut),
so awaken audit verify --file checks it offline. Line format: docs/security.md.`

func auditExportCommand(fs *flag.FlagSet, io cmdIO) runner {
	stdout, stderr := io.stdout, io.stderr
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
		ra, err := sel.read(ctx, forExport)
		if err != nil {
			return err
		}
		if *sel.run != "" {
			ra.carried, ra.uncovered = runCheckpoint(ra.recs, ra.checkpoints, ra.checkpointSubject)
		}
		for _, cp := range ra.carried {
			fmt.Fprintf(stderr, "awaken audit export: the export starts from the checkpoint at %s (seq %d)", cp.Time.UTC().Format(time.RFC3339), cp.Seq)
			if ra.extendedFrom > 0 {
				fmt.Fprintf(stderr, ": records from its cut, seq %d, so the chains the range cuts continue from the heads it names", ra.extendedFrom)
			}
			fmt.Fprintln(stderr)
		}
		if len(ra.uncovered) > 0 {
			fmt.Fprintf(stderr, "awaken audit export: no checkpoint links %s: verify --file will need --without-checkpoint\n", startsOf(ra.uncovered))
		}
		w := stdout
		if *out != "" {
			f, err := os.Create(*out)
			if err != nil {
				return err
			}
			defer f.Close()
			w = f
		}
		return auditchain.ExportWith(w, ra.recs, auditchain.ExportOptions{PublicKey: pub, CheckpointSubject: ra.checkpointSubject, Checkpoints: ra.carried})
	}
}

// runCheckpoint is the checkpoint a run's export starts from when its chain starts past
// its first record: the latest of cps whose head of the chain is the record before its
// first, or one of its records. None links: the chain's start (uncovered), or nothing when
// the chain starts at n 1 or a checkpoint contradicts it (verify names that).
func runCheckpoint(recs, cps []auditchain.Record, cpSubject string) ([]auditchain.Record, map[string]uint64) {
	refs, err := auditchain.AnchorCut(recs, nil, cpSubject, nil)
	var ue *auditchain.UnanchoredError
	if !errors.As(err, &ue) {
		return nil, nil
	}
	cut := ue.Chains
	if refs, err = auditchain.AnchorCut(recs, cps, cpSubject, nil); errors.As(err, &ue) {
		return nil, ue.Chains
	} else if err != nil {
		return nil, cut // a checkpoint contradicts the chain: verify --run names it
	}
	for _, ref := range refs {
		for _, cp := range cps {
			if cp.Seq == ref.Seq {
				return []auditchain.Record{cp}, nil
			}
		}
	}
	return nil, nil
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
