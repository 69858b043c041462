package contracts

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// This file binds an approval to what it approves: the digest of the call's arguments and
// of the policies that asked, and who has approved a ticket that needs several approvals.

// MaxApprovals bounds the approvals an ask rule may require.
const MaxApprovals = 16

// DigestPrefix starts every digest awaken records: the algorithm, then the lower-case hex.
const DigestPrefix = "sha256:"

// ArgumentsDigest is "sha256:{hex}" of the canonical JSON of args (object keys sorted, no
// insignificant whitespace, strings escaped uniformly, numbers as written — the same form
// a submission's hash uses), so arguments equal as JSON have one digest whatever their
// spelling. Bytes that are not one JSON value (absent arguments read as null) are hashed
// as they are.
func ArgumentsDigest(args json.RawMessage) string {
	b := bytes.TrimSpace(args)
	if len(b) == 0 {
		b = []byte("null")
	}
	if c, err := wireCanonicalJSON(b); err == nil {
		b = c
	}
	sum := sha256.Sum256(b)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// PolicyDigest is "sha256:{hex}" of the canonical JSON of the host policy and the run
// policy (absent when the batch carries none) that decided a call: the policy version an
// approval answers. Any change to a rule, the mode or the default changes it.
func PolicyDigest(host PolicyConfig, run *PolicyConfig) string {
	b, err := json.Marshal(struct {
		Host PolicyConfig  `json:"host"`
		Run  *PolicyConfig `json:"run,omitempty"`
	}{host, run})
	if err == nil {
		if c, cerr := wireCanonicalJSON(b); cerr == nil {
			b = c
		}
	}
	sum := sha256.Sum256(b)
	return DigestPrefix + hex.EncodeToString(sum[:])
}

// Digest is the ticket's arguments digest: the recorded one, or computed from its
// arguments for a ticket opened before tickets carried it.
func (t *ResumeTicket) Digest() string {
	if t.ArgumentsDigest != "" {
		return t.ArgumentsDigest
	}
	return ArgumentsDigest(t.Arguments)
}

// Required is how many distinct approvals t needs (at least one).
func (t *ResumeTicket) Required() int { return max(t.ApprovalsRequired, 1) }

// ApprovedBy returns the approval t already holds from the actor of actor, if any
// ([ApproverKey]: the same person whatever claim follows "as").
func (t *ResumeTicket) ApprovedBy(actor string) (TicketApproval, bool) {
	k := ApproverKey(actor)
	for _, a := range t.Approvals {
		if ApproverKey(a.Actor) == k {
			return a, true
		}
	}
	return TicketApproval{}, false
}

// ApprovalOf returns the approval t holds from resume command resumeID, if any.
func (t *ResumeTicket) ApprovalOf(resumeID string) (TicketApproval, bool) {
	for _, a := range t.Approvals {
		if a.ResumeID == resumeID {
			return a, true
		}
	}
	return TicketApproval{}, false
}

// ApproverKey is who an authenticated actor is, for counting distinct approvers: the
// authenticated name before any " as {claim}" the api appends (so one token approving
// twice under two claimed names counts once), case-insensitive, surrounding spaces
// ignored.
func ApproverKey(actor string) string {
	a, _, _ := strings.Cut(strings.TrimSpace(actor), " as ")
	return strings.ToLower(strings.TrimSpace(a))
}
