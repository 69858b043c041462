package contracts

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestEncodeRecordStampsItsVersion: a record is written with its format version first,
// read back whole, and its version checked.
func TestEncodeRecordStampsItsVersion(t *testing.T) {
	tk := ResumeTicket{CorrelationID: "perm:run-1:1:c1", RunID: "run-1", Reason: ReasonPermission}
	b, err := EncodeRecord(tk)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), `{"format":1,"correlation_id":`) {
		t.Fatalf("record %s does not begin with its format", b)
	}
	var back ResumeTicket
	if err := DecodeRecordStrict(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.CorrelationID != tk.CorrelationID || back.Reason != tk.Reason {
		t.Fatalf("read back %+v", back)
	}
	if v, _, err := RecordVersion(b); err != nil || v != 1 {
		t.Fatalf("version %d, %v", v, err)
	}
}

// TestDecodeRecordVersions: a record without the field is version 1 (the versions
// before it), and one of a version this version does not read is unsupported_format.
func TestDecodeRecordVersions(t *testing.T) {
	var rec CallRecord
	if err := DecodeRecord([]byte(`{"index":2,"call_id":"c2"}`), &rec); err != nil || rec.CallID != "c2" {
		t.Fatalf("unstamped record: %v, %+v", err, rec)
	}
	for _, data := range []string{`{"format":9,"index":2}`, `{"index":2,"format":9}`} {
		err := DecodeRecord([]byte(data), &rec)
		var rej *Rejection
		if !errors.As(err, &rej) || rej.Code != RejectUnsupportedFormat {
			t.Errorf("%s: got %v, want unsupported_format", data, err)
		}
	}
	if err := DecodeRecord([]byte(`{"format":"x","index":2}`), &rec); err == nil {
		t.Error("a format that is no version was read")
	}
	if err := DecodeRecordStrict([]byte(`{"format":1}`), &rec); err != nil {
		t.Errorf("an empty stamped record: %v", err)
	}
}

// TestNewFormatsWaitForTheSwitch: a record whose previous version reads no stamp (the
// strictly read ledger entry) is written without one until new formats are on; a new
// message type is refused on the publish path until then.
func TestNewFormatsWaitForTheSwitch(t *testing.T) {
	defer SetNewFormats(NewFormats())
	entry := LimitLedgerEntry{Limit: "l", Key: "k"}
	SetNewFormats(false)
	b, err := EncodeRecord(&entry)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"format"`) {
		t.Fatalf("previous formats: ledger entry %s carries a stamp its previous readers refuse", b)
	}
	SetNewFormats(true)
	if b, err = EncodeRecord(&entry); err != nil || !strings.HasPrefix(string(b), `{"format":2,`) {
		t.Fatalf("new formats: ledger entry %s, %v", b, err)
	}
	var back LimitLedgerEntry
	if err := DecodeRecordStrict(b, &back); err != nil || back.Limit != "l" {
		t.Fatalf("read back %+v, %v", back, err)
	}

	const newType = "io.awaken.test.new.v1"
	messageFormatByType[newType] = &MessageFormat{Type: newType, New: true}
	defer delete(messageFormatByType, newType)
	SetNewFormats(false)
	if MayWrite(newType) || CheckMessageFormat(newType) == nil {
		t.Error("a new type may be written while new formats are off")
	}
	SetNewFormats(true)
	if err := CheckMessageFormat(newType); err != nil {
		t.Error(err)
	}
}

// TestEveryTypeHasAFormat: every CloudEvent type constant of this package is registered,
// so a type added without a format entry fails here, not in a mixed-version deployment.
func TestEveryTypeHasAFormat(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(node ast.Node) bool {
			vs, ok := node.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Type") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				typ, _ := strconv.Unquote(lit.Value)
				if !strings.HasPrefix(typ, "io.awaken.") {
					continue
				}
				n++
				if _, ok := MessageFormatOf(typ); !ok {
					t.Errorf("%s (%s) has no entry in messageFormats (format.go)", name.Name, typ)
				}
				if _, v := MessageVersion(typ); v == 0 {
					t.Errorf("%s (%s) names no .vN version", name.Name, typ)
				}
			}
			return true
		})
	}
	if n < 20 {
		t.Fatalf("found %d type constants: the scan is broken", n)
	}
}

// TestOtherVersion tells another version of an accepted type from a foreign type.
func TestOtherVersion(t *testing.T) {
	if got, ok := OtherVersion("io.awaken.tool.result.v2", TypeBatchResults, TypeToolResult); !ok || got != TypeToolResult {
		t.Errorf("v2 of tool.result: %q %v", got, ok)
	}
	if _, ok := OtherVersion("io.awaken.tool.progress.v1", TypeToolResult); ok {
		t.Error("a foreign type read as another version")
	}
}

// TestUpgradeReadsAnOlderVersion: a format's Upgrade rewrites an older version before it
// is decoded, and only an older one.
func TestUpgradeReadsAnOlderVersion(t *testing.T) {
	f := recordFormatByType[reflect.TypeFor[ToolPause]()]
	saved := *f
	defer func() { *f = saved }()
	f.Current, f.Upgrade = 3, func(from int, data []byte) ([]byte, error) {
		return []byte(strings.Replace(string(data), `"tool":`, `"tool_id":`, 1)), nil
	}
	var p ToolPause
	if err := DecodeRecordStrict([]byte(`{"format":2,"tool":"echo"}`), &p); err != nil || p.ToolID != "echo" {
		t.Fatalf("version 2 through Upgrade: %+v, %v", p, err)
	}
	if err := DecodeRecordStrict([]byte(`{"format":3,"tool":"echo"}`), &p); err == nil {
		t.Fatal("the current version went through Upgrade")
	}
}
