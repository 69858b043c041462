package execcore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/awaken-dev/awaken/internal/execcore"
	"github.com/awaken-dev/awaken/internal/execcore/exectest"
	"github.com/awaken-dev/awaken/internal/pipeline"
	"github.com/awaken-dev/awaken/pkg/contracts"
)

// objectsConfig lowers the inline limit so that a 2 KiB output goes by reference.
const objectsConfig = testConfig + `  inline_output_bytes: 1024
`

// objects lists the objects bucket: name → size.
func objects(t *testing.T, e *exectest.Env) map[string]uint64 {
	t.Helper()
	st, err := e.JS.ObjectStore(e.Ctx, e.Names.ObjectsBucket())
	if err != nil {
		t.Fatal(err)
	}
	infos, err := st.List(e.Ctx)
	if err != nil && err != jetstream.ErrNoObjectsFound {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, i := range infos {
		got[i.Name] = i.Size
	}
	return got
}

func objectText(t *testing.T, e *exectest.Env, name string) (string, string) {
	t.Helper()
	st, err := e.JS.ObjectStore(e.Ctx, e.Names.ObjectsBucket())
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.GetBytes(e.Ctx, name)
	if err != nil {
		t.Fatalf("object %s: %v", name, err)
	}
	info, err := st.GetInfo(e.Ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(res), info.Headers.Get("Content-Type")
}

// link returns the one resource_link block of a committed output.
func link(t *testing.T, rec contracts.CallRecord) contracts.ContentBlock {
	t.Helper()
	if rec.Phase.Kind != contracts.PhaseCompleted || rec.Phase.Output == nil {
		t.Fatalf("record is %s (%q), want Completed", rec.Phase.Kind, rec.Phase.Reason)
	}
	out := rec.Phase.Output
	if len(out.Content) != 1 || out.Content[0].Type != contracts.BlockResourceLink {
		t.Fatalf("output %.200v, want one resource_link block", out.Content)
	}
	return out.Content[0]
}

// TestLargeOutputGoesByReference: an output over the inline limit is committed as a link to
// an object holding its text; a crash after the commit is redelivered and re-announces the
// same link, and the bucket holds one object.
func TestLargeOutputGoesByReference(t *testing.T) {
	e := exectest.New(t, objectsConfig)
	e.SetFault(exectest.FailTimes(pipeline.FaultAfterCommit, 1, nil))
	big := strings.Repeat("large output ", 200) // 2600 bytes
	start(t, e, &scripted{body: text(big)})
	c := call("call_1", "tool", neverReplay)
	seq := e.Allow(c)
	e.WaitTerminal(c)
	e.WaitSettled(contracts.ConsumerBrainExec, seq)
	l := link(t, e.Record(c))
	if !strings.HasPrefix(l.Name, c.Op()+".") || l.URI != contracts.ObjectURI(l.Name) ||
		l.MimeType != contracts.MimeTypeText || l.Size != int64(len(big)) {
		t.Errorf("link %+v, want a text object of %d bytes named after %s", l, len(big), c.Op())
	}
	if got, ctype := objectText(t, e, l.Name); got != big || ctype != contracts.MimeTypeText {
		t.Errorf("object holds %d bytes of %q, want the output's text", len(got), ctype)
	}
	if got := objects(t, e); len(got) != 1 {
		t.Errorf("objects %v, want exactly one", got)
	}
	checkOneOutput(t, e, c, contracts.OutcomeCompleted)

}

// TestObjectRewriteIsIdempotent: storing the same output of a call again — what a handler
// that crashed between the object write and the commit does on redelivery — writes the same
// object under the same name; different bytes (a replayed body that answered otherwise) get
// a name of their own and never overwrite what a committed link may point at.
func TestObjectRewriteIsIdempotent(t *testing.T) {
	e := exectest.New(t, objectsConfig)
	x := start(t, e, &scripted{body: text("unused")})
	op := contracts.OperationID("run-1", 3, "call_1")
	blocks := contracts.BlocksOutput("call_1", []contracts.ContentBlock{
		{Type: contracts.BlockText, Text: strings.Repeat("a", 800)},
		{Type: contracts.BlockText, Text: strings.Repeat("b", 800)},
	}, false)
	first, err := x.ByReference(context.Background(), op, blocks)
	if err != nil {
		t.Fatal(err)
	}
	again, err := x.ByReference(context.Background(), op, blocks)
	if err != nil {
		t.Fatal(err)
	}
	if !first.Equal(again) {
		t.Errorf("rewrite changed the output: %+v then %+v", first.Content, again.Content)
	}
	if first.Content[0].MimeType != contracts.MimeTypeContent {
		t.Errorf("a two-block output is stored as %q, want %q", first.Content[0].MimeType, contracts.MimeTypeContent)
	}
	if got := objects(t, e); len(got) != 1 {
		t.Fatalf("objects %v after a rewrite, want one", got)
	}
	other, err := x.ByReference(context.Background(), op, contracts.TextOutput("call_1", strings.Repeat("c", 2000)))
	if err != nil {
		t.Fatal(err)
	}
	if other.Content[0].Name == first.Content[0].Name {
		t.Fatal("different bytes were stored under the name of the first object")
	}
	if got, _ := objectText(t, e, first.Content[0].Name); !strings.Contains(got, strings.Repeat("a", 800)) {
		t.Errorf("the first object was overwritten: %.80q", got)
	}
	if got := objects(t, e); len(got) != 2 {
		t.Errorf("objects %v, want two", got)
	}
}

// TestFinishOutputLimit: the limit applies to the output's JSON, envelope and escapes
// included; an output at the limit passes with its size reported, one byte more fails,
// and one whose strings alone exceed the limit fails without being encoded.
func TestFinishOutputLimit(t *testing.T) {
	const limit = 200
	oneByte, err := json.Marshal(contracts.TextOutput("c", "a"))
	if err != nil {
		t.Fatal(err)
	}
	fits := limit - (len(oneByte) - 1) // text bytes that make the JSON exactly limit long
	tooLarge := fmt.Sprintf("tool execution failed: output exceeds %d bytes", limit)
	for _, tc := range []struct {
		name     string
		out      contracts.ToolOutput
		wantText string // "" means the output passes unchanged
	}{
		{"exactly the limit", contracts.TextOutput("", strings.Repeat("a", fits)), ""},
		{"one byte over (the envelope decides)", contracts.TextOutput("", strings.Repeat("a", fits+1)), tooLarge},
		{"escapes count as written", contracts.TextOutput("", strings.Repeat("\x01", fits/6+1)), tooLarge},
		{"strings alone over the limit", contracts.TextOutput("", strings.Repeat("a", limit+1)), tooLarge},
		{"image data counts", contracts.ToolOutput{Content: []contracts.ContentBlock{
			{Type: contracts.BlockImage, Source: &contracts.ImageSource{Type: "base64", MediaType: "image/png", Data: strings.Repeat("A", limit)}}}}, tooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, size := execcore.FinishOutputWithin("c", tc.out, limit)
			if tc.wantText == "" {
				b, err := json.Marshal(got)
				if err != nil {
					t.Fatal(err)
				}
				if !got.Equal(contracts.ToolOutput{CallID: "c", Content: tc.out.Content}) || size != len(b) || size > limit {
					t.Errorf("got %.80q (size %d, JSON %d bytes), want the output unchanged at most %d bytes", got.Text(), size, len(b), limit)
				}
				return
			}
			if got.Text() != tc.wantText || !got.IsError || size >= 0 {
				t.Errorf("got %.80q (error %v, size %d), want %q", got.Text(), got.IsError, size, tc.wantText)
			}
		})
	}
}

// TestOutputSizeLimits: an output of several MiB is stored and linked; one over 64 MiB
// completes with the oversize execution error, and nothing is stored. (The boundary
// itself is TestFinishOutputLimit's: encoding 64 MiB under the race detector takes ten
// seconds and more.)
func TestOutputSizeLimits(t *testing.T) {
	e := exectest.New(t, testConfig)
	mib5 := strings.Repeat("0123456789abcdef", 5<<16) // 5 MiB
	start(t, e, &scripted{body: func(_ context.Context, inv execcore.Invocation) (contracts.ToolOutput, error) {
		if inv.CallID == "huge" {
			return contracts.TextOutput("", strings.Repeat("x", contracts.MaxOutputBytes+1)), nil
		}
		return contracts.TextOutput("", mib5), nil
	}})
	big, huge := call("big", "tool", neverReplay), call("huge", "tool", neverReplay)
	e.Allow(big)
	l := link(t, e.WaitTerminal(big))
	if l.Size != int64(len(mib5)) {
		t.Errorf("link size %d, want %d", l.Size, len(mib5))
	}
	if got, _ := objectText(t, e, l.Name); got != mib5 {
		t.Errorf("object holds %d bytes, want the 5 MiB output", len(got))
	}
	e.Allow(huge)
	got, isErr := exectest.Text(t, e.WaitTerminal(huge))
	if want := fmt.Sprintf("tool execution failed: output exceeds %d bytes", contracts.MaxOutputBytes); got != want || !isErr {
		t.Errorf("huge output gave %.120q (error %v), want %q", got, isErr, want)
	}
	if got := objects(t, e); len(got) != 1 {
		t.Errorf("objects %v, want only the 5 MiB one", got)
	}
}
