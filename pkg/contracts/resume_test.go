package contracts

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Fixtures of the resume tests, prefixed "rt" because other files of this package are
// written in parallel.

var rtNow = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)

func rtTicket(reason TicketReason) ResumeTicket {
	deadline := rtNow.Add(time.Minute)
	return ResumeTicket{
		CorrelationID: "c1",
		RunID:         "run-1",
		ThreadID:      "thread-1",
		SnapshotID:    "snap-1",
		BatchID:       BatchID("run-1", 0),
		CallID:        "call-1",
		ToolID:        "tool-1",
		Arguments:     json.RawMessage(`{}`),
		Reason:        reason,
		Deadline:      &deadline,
		OpenedAt:      rtNow.Add(-time.Minute),
	}
}

func rtAllow() ResumeResult {
	return ResumeResult{Permission: &PermissionDecision{Decision: DecisionAllow}}
}

func rtDeny(reason string) ResumeResult {
	return ResumeResult{Permission: &PermissionDecision{Decision: DecisionDeny, Reason: reason}}
}

func rtToolResult(callID string) ResumeResult {
	o := btText(callID, "done")
	return ResumeResult{ToolResult: &o}
}

func rtCommand() ResumeCommand {
	return ResumeCommand{CorrelationID: "c1", RunID: "run-1", ThreadID: "thread-1", SnapshotID: "snap-1", Result: rtAllow()}
}

// rtWantCode asserts err is a *ResumeError with code, matched both by errors.Is against the
// code's sentinel and by errors.As.
func rtWantCode(t *testing.T, err error, code ResumeErrorCode, label string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("%s: unexpected error %v", label, err)
		}
		return
	}
	var re *ResumeError
	if !errors.As(err, &re) || re.Code != code {
		t.Fatalf("%s: error %v, want code %s", label, err, code)
	}
	if !errors.Is(err, rtSentinel[code]) {
		t.Fatalf("%s: errors.Is(%v, sentinel of %s) is false", label, err, code)
	}
}

var rtSentinel = map[ResumeErrorCode]*ResumeError{
	ResumeNotWaiting:          ErrNotWaiting,
	ResumeCorrelationMismatch: ErrCorrelationMismatch,
	ResumeRunMismatch:         ErrRunMismatch,
	ResumeThreadMismatch:      ErrThreadMismatch,
	ResumeSnapshotMismatch:    ErrSnapshotMismatch,
	ResumeExpired:             ErrExpired,
	ResumeResultKindMismatch:  ErrResultKindMismatch,
	ResumeToolCallMismatch:    ErrToolCallMismatch,
	ResumeInvalid:             ErrInvalidResume,
}

func TestMatchingResumeIsAccepted(t *testing.T) {
	for name, tc := range map[string]struct {
		reason TicketReason
		result ResumeResult
	}{
		"permission allow":         {ReasonPermission, rtAllow()},
		"permission allow + note":  {ReasonPermission, ResumeResult{Permission: &PermissionDecision{Decision: DecisionAllow, Note: "reviewed"}}},
		"permission deny":          {ReasonPermission, rtDeny("")},
		"permission deny + reason": {ReasonPermission, rtDeny("operator policy")},
		"scheduled allow":          {ReasonScheduledAction, rtAllow()},
		"client tool result":       {ReasonClientExecution, rtToolResult("call-1")},
	} {
		t.Run(name, func(t *testing.T) {
			tk := rtTicket(tc.reason)
			rtWantCode(t, ValidateResume(&tk, ResumeCommandFromTicket(tk, tc.result), rtNow), "", name)
		})
	}
}

func TestEachResumeMismatchFailsClosed(t *testing.T) {
	tk := rtTicket(ReasonPermission)
	for _, tc := range []struct {
		name string
		edit func(*ResumeCommand)
		now  time.Time
		want ResumeErrorCode
	}{
		{"correlation", func(c *ResumeCommand) { c.CorrelationID = "x" }, rtNow, ResumeCorrelationMismatch},
		{"run", func(c *ResumeCommand) { c.RunID = "x" }, rtNow, ResumeRunMismatch},
		{"thread", func(c *ResumeCommand) { c.ThreadID = "x" }, rtNow, ResumeThreadMismatch},
		{"snapshot", func(c *ResumeCommand) { c.SnapshotID = "x" }, rtNow, ResumeSnapshotMismatch},
		{"expired", func(*ResumeCommand) {}, tk.Deadline.Add(time.Nanosecond), ResumeExpired},
		{"result kind", func(c *ResumeCommand) { c.Result = rtToolResult("call-1") }, rtNow, ResumeResultKindMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := rtCommand()
			tc.edit(&cmd)
			rtWantCode(t, ValidateResume(&tk, cmd, tc.now), tc.want, tc.name)
		})
	}
	client := rtTicket(ReasonClientExecution)
	rtWantCode(t, ValidateResume(&client, ResumeCommandFromTicket(client, rtToolResult("other-call")), rtNow), ResumeToolCallMismatch, "tool call")
	rtWantCode(t, ValidateResume(nil, rtCommand(), rtNow), ResumeNotWaiting, "no ticket")
}

// TestResumeChecksRunInTheDocumentedOrder starts from a command wrong on every axis and
// repairs one axis at a time: each step must report the next axis of the documented order.
func TestResumeChecksRunInTheDocumentedOrder(t *testing.T) {
	tk := rtTicket(ReasonClientExecution)
	cmd := ResumeCommand{CorrelationID: "x", RunID: "x", ThreadID: "x", SnapshotID: "x", Result: rtAllow()}
	now := tk.Deadline.Add(time.Second)
	steps := []struct {
		want   ResumeErrorCode
		repair func()
	}{
		{ResumeInvalid, func() { cmd.Result.Permission.Decision = DecisionAllow }},
		{ResumeNotWaiting, nil},
		{ResumeCorrelationMismatch, func() { cmd.CorrelationID = tk.CorrelationID }},
		{ResumeRunMismatch, func() { cmd.RunID = tk.RunID }},
		{ResumeThreadMismatch, func() { cmd.ThreadID = tk.ThreadID }},
		{ResumeSnapshotMismatch, func() { cmd.SnapshotID = tk.SnapshotID }},
		{ResumeExpired, func() { now = *tk.Deadline }},
		{ResumeResultKindMismatch, func() { cmd.Result = rtToolResult("other") }},
		{ResumeToolCallMismatch, func() { cmd.Result = rtToolResult(tk.CallID) }},
		{"", nil},
	}
	cmd.Result.Permission.Decision = "maybe"
	for i, s := range steps {
		ticket := &tk
		if s.want == ResumeInvalid || s.want == ResumeNotWaiting {
			// No ticket yet: structure is judged before the ticket is even looked up.
			ticket = nil
		}
		rtWantCode(t, ValidateResume(ticket, cmd, now), s.want, fmt.Sprintf("step %d", i))
		if s.repair != nil {
			s.repair()
		}
	}
}

func TestResumeResultKindMatrix(t *testing.T) {
	results := map[string]ResumeResult{
		"allow":             rtAllow(),
		"deny":              rtDeny("no"),
		"tool result":       rtToolResult("call-1"),
		"foreign tool call": rtToolResult("other-call"),
	}
	for _, tc := range []struct {
		reason TicketReason
		want   map[string]ResumeErrorCode
	}{
		{ReasonPermission, map[string]ResumeErrorCode{"allow": "", "deny": "", "tool result": ResumeResultKindMismatch, "foreign tool call": ResumeResultKindMismatch}},
		{ReasonScheduledAction, map[string]ResumeErrorCode{"allow": "", "deny": "", "tool result": ResumeResultKindMismatch, "foreign tool call": ResumeResultKindMismatch}},
		{ReasonClientExecution, map[string]ResumeErrorCode{"allow": ResumeResultKindMismatch, "deny": ResumeResultKindMismatch, "tool result": "", "foreign tool call": ResumeToolCallMismatch}},
		{"delegation", map[string]ResumeErrorCode{"allow": ResumeResultKindMismatch, "deny": ResumeResultKindMismatch, "tool result": ResumeResultKindMismatch, "foreign tool call": ResumeResultKindMismatch}},
		{"", map[string]ResumeErrorCode{"allow": ResumeResultKindMismatch, "deny": ResumeResultKindMismatch, "tool result": ResumeResultKindMismatch, "foreign tool call": ResumeResultKindMismatch}},
	} {
		for name, result := range results {
			want, ok := tc.want[name]
			if !ok {
				t.Fatalf("%s: no expectation for %s", tc.reason, name)
			}
			t.Run(string(tc.reason)+"/"+name, func(t *testing.T) {
				tk := rtTicket(tc.reason)
				rtWantCode(t, ValidateResume(&tk, ResumeCommandFromTicket(tk, result), rtNow), want, name)
			})
		}
	}
}

func TestNoDeadlineNeverExpires(t *testing.T) {
	tk := rtTicket(ReasonPermission)
	tk.Deadline = nil
	far := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	rtWantCode(t, ValidateResume(&tk, rtCommand(), far), "", "no deadline")

	// A deadline is inclusive: a resume exactly at it is in time, one instant later is not.
	tk = rtTicket(ReasonPermission)
	rtWantCode(t, ValidateResume(&tk, rtCommand(), *tk.Deadline), "", "at the deadline")
	rtWantCode(t, ValidateResume(&tk, rtCommand(), tk.Deadline.Add(time.Nanosecond)), ResumeExpired, "after the deadline")
}

func TestResumeCommandFromTicketCopiesIdentity(t *testing.T) {
	tk := rtTicket(ReasonClientExecution)
	result := rtToolResult("call-1")
	cmd := ResumeCommandFromTicket(tk, result)
	want := ResumeCommand{CorrelationID: "c1", RunID: "run-1", ThreadID: "thread-1", SnapshotID: "snap-1"}
	got := cmd
	got.Result = ResumeResult{}
	if got != want {
		t.Fatalf("identity %+v, want %+v", got, want)
	}
	if !batchOutputEqual(*cmd.Result.ToolResult, *result.ToolResult) {
		t.Fatalf("result %+v", cmd.Result.ToolResult)
	}
	rtWantCode(t, ValidateResume(&tk, cmd, rtNow), "", "validates against its own ticket")
	// The command owns its result.
	result.ToolResult.Content[0].Text = "tampered"
	if cmd.Result.ToolResult.Content[0].Text != "done" {
		t.Fatal("the command aliases the caller's result")
	}
	perm := rtAllow()
	pc := ResumeCommandFromTicket(rtTicket(ReasonPermission), perm)
	perm.Permission.Decision = DecisionDeny
	if pc.Result.Permission.Decision != DecisionAllow {
		t.Fatal("the command aliases the caller's decision")
	}
}

func TestRejectedResumeValidationMutatesNothing(t *testing.T) {
	tk := rtTicket(ReasonClientExecution)
	cmd := ResumeCommandFromTicket(tk, rtToolResult("other-call"))
	cmd.RunID = "x"
	tkBefore, _ := json.Marshal(tk)
	cmdBefore, _ := json.Marshal(cmd)
	deadline := *tk.Deadline
	for _, now := range []time.Time{rtNow, deadline.Add(time.Hour)} {
		if err := ValidateResume(&tk, cmd, now); err == nil {
			t.Fatal("expected a rejection")
		}
	}
	cmd.RunID = tk.RunID
	if err := ValidateResume(&tk, cmd, rtNow); !errors.Is(err, ErrToolCallMismatch) {
		t.Fatalf("want tool_call_mismatch, got %v", err)
	}
	cmd.RunID = "x"
	tkAfter, _ := json.Marshal(tk)
	cmdAfter, _ := json.Marshal(cmd)
	if string(tkBefore) != string(tkAfter) || string(cmdBefore) != string(cmdAfter) || !tk.Deadline.Equal(deadline) {
		t.Fatalf("validation mutated its inputs:\n%s\n%s", tkAfter, cmdAfter)
	}
}

func TestResumeCommandStructure(t *testing.T) {
	out := btText("call-1", "x")
	for _, tc := range []struct {
		name   string
		result ResumeResult
		corr   string
		want   ResumeErrorCode
	}{
		{"allow", rtAllow(), "c1", ""},
		{"tool result", ResumeResult{ToolResult: &out}, "c1", ""},
		{"neither", ResumeResult{}, "c1", ResumeInvalid},
		{"both", ResumeResult{Permission: &PermissionDecision{Decision: DecisionAllow}, ToolResult: &out}, "c1", ResumeInvalid},
		{"unknown decision", ResumeResult{Permission: &PermissionDecision{Decision: "approve"}}, "c1", ResumeInvalid},
		{"empty decision", ResumeResult{Permission: &PermissionDecision{}}, "c1", ResumeInvalid},
		{"allow with reason", ResumeResult{Permission: &PermissionDecision{Decision: DecisionAllow, Reason: "r"}}, "c1", ResumeInvalid},
		{"deny with note", ResumeResult{Permission: &PermissionDecision{Decision: DecisionDeny, Note: "n"}}, "c1", ResumeInvalid},
		{"allow with arguments", ResumeResult{Permission: &PermissionDecision{Decision: DecisionAllow, Arguments: json.RawMessage(`{"a":1}`)}}, "c1", ""},
		{"deny with arguments", ResumeResult{Permission: &PermissionDecision{Decision: DecisionDeny, Arguments: json.RawMessage(`{"a":1}`)}}, "c1", ResumeInvalid},
		{"deny with null arguments", ResumeResult{Permission: &PermissionDecision{Decision: DecisionDeny, Arguments: json.RawMessage(`null`)}}, "c1", ""},
		{"no correlation", rtAllow(), "", ResumeInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := rtCommand()
			cmd.CorrelationID = tc.corr
			cmd.Result = tc.result
			rtWantCode(t, cmd.Validate(), tc.want, tc.name)
			if tc.want == ResumeInvalid {
				// Structure is judged first, before the missing ticket.
				rtWantCode(t, ValidateResume(nil, cmd, rtNow), ResumeInvalid, tc.name+" without ticket")
			}
		})
	}
}

func TestResumeErrorMatchesByCode(t *testing.T) {
	tk := rtTicket(ReasonPermission)
	err := ValidateResume(&tk, rtCommand(), tk.Deadline.Add(time.Second))
	wrapped := fmt.Errorf("gate: %w", err)
	if !errors.Is(wrapped, ErrExpired) {
		t.Fatalf("errors.Is(wrapped, ErrExpired) is false for %v", wrapped)
	}
	for code, s := range rtSentinel {
		if code != ResumeExpired && errors.Is(wrapped, s) {
			t.Fatalf("an expired refusal matches %s", code)
		}
	}
	if len(rtSentinel) != 9 {
		t.Fatalf("%d sentinels", len(rtSentinel))
	}
	var re *ResumeError
	if !errors.As(wrapped, &re) || re.Code != ResumeExpired || re.Error() != "expired: "+re.Message {
		t.Fatalf("errors.As: %#v", re)
	}
	if errors.Is(err, errors.New("expired")) {
		t.Fatal("a plain error matched")
	}
	var nilErr *ResumeError
	if nilErr.Is(ErrExpired) {
		t.Fatal("a nil *ResumeError matched")
	}
	codes := map[ResumeErrorCode]string{
		ResumeNotWaiting: "not_waiting", ResumeCorrelationMismatch: "correlation_mismatch", ResumeRunMismatch: "run_mismatch",
		ResumeThreadMismatch: "thread_mismatch", ResumeSnapshotMismatch: "snapshot_mismatch", ResumeExpired: "expired",
		ResumeResultKindMismatch: "result_kind_mismatch", ResumeToolCallMismatch: "tool_call_mismatch", ResumeInvalid: "invalid_resume",
	}
	for c, s := range codes {
		if string(c) != s || rtSentinel[c].Code != c {
			t.Fatalf("code %q: wire %q, sentinel %q", c, s, rtSentinel[c].Code)
		}
	}
	if len(codes) != len(rtSentinel) {
		t.Fatal("codes and sentinels disagree")
	}
}

func TestResumeActorIsBounded(t *testing.T) {
	cmd := rtCommand()
	cmd.Actor = strings.Repeat("a", MaxActorLength)
	rtWantCode(t, cmd.Validate(), "", "actor at the limit")
	cmd.Actor += "a"
	rtWantCode(t, cmd.Validate(), ResumeInvalid, "actor over the limit")
}

// TestEditedArguments: an allow edits the call only with arguments that differ (as JSON)
// from the proposed ones; a deny never edits.
func TestEditedArguments(t *testing.T) {
	proposed := json.RawMessage(`{"a":1,"b":"x"}`)
	for _, tc := range []struct {
		name string
		p    *PermissionDecision
		want string
	}{
		{"none", &PermissionDecision{Decision: DecisionAllow}, ""},
		{"equal, reordered and spaced", &PermissionDecision{Decision: DecisionAllow, Arguments: json.RawMessage(`{ "b":"x", "a":1 }`)}, ""},
		{"different", &PermissionDecision{Decision: DecisionAllow, Arguments: json.RawMessage(`{"a":2}`)}, `{"a":2}`},
		{"deny", &PermissionDecision{Decision: DecisionDeny, Arguments: json.RawMessage(`{"a":2}`)}, ""},
		{"null", &PermissionDecision{Decision: DecisionAllow, Arguments: json.RawMessage(`null`)}, ""},
		{"nil decision", nil, ""},
	} {
		if got := tc.p.EditedArguments(proposed); string(got) != tc.want {
			t.Errorf("%s: edited %s, want %q", tc.name, got, tc.want)
		}
	}
	for _, bad := range []string{`[1]`, `"x"`, `null`, `1`, `{"a":`} {
		if _, err := ArgumentsObject(json.RawMessage(bad)); !errors.Is(err, ErrInvalidEditedArguments) {
			t.Errorf("ArgumentsObject(%s) = %v, want invalid_arguments", bad, err)
		}
	}
	if got, err := ArgumentsObject(json.RawMessage(" {\"a\" : [1, 2]}\n")); err != nil || string(got) != `{"a":[1,2]}` {
		t.Errorf("ArgumentsObject compacts to %s, %v", got, err)
	}
}
