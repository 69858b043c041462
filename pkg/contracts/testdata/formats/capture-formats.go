//go:build ignore

// capture-formats renders every record and message payload type of a version with every
// field it can fill set, as the golden inputs of the next version's format test
// (pkg/contracts/testdata/formats/{commit}/filled). Run it in a checkout of the previous
// version, not this one: the files pin what that version wrote.
//
//	git archive {commit} | tar -x -C /tmp/prev && cp pkg/contracts/testdata/formats/capture-formats.go /tmp/prev/
//	cd /tmp/prev && go run capture-formats.go $OLDPWD/pkg/contracts/testdata/formats/{commit}/filled
//
// A field of a type that validates its JSON (an enum, a phase) is left zero; a record
// whose zero value does not encode is left out (the captured KV samples and the kernel
// goldens cover it).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/awaken-dev/awaken/pkg/contracts"
)

var unmarshaler = reflect.TypeFor[json.Unmarshaler]()
var marshaler = reflect.TypeFor[json.Marshaler]()
var at = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func fill(v reflect.Value, depth int) {
	if depth > 6 {
		return
	}
	t := v.Type()
	if t == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(at))
		return
	}
	if t == reflect.TypeFor[json.RawMessage]() {
		v.SetBytes([]byte(`{"k":"v"}`))
		return
	}
	if reflect.PointerTo(t).Implements(unmarshaler) || t.Implements(marshaler) {
		return // validated or custom: left zero
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			if t.Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		fill(p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(t, 1, 1)
		fill(s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(t)
		k := reflect.New(t.Key()).Elem()
		fill(k, depth+1)
		e := reflect.New(t.Elem()).Elem()
		fill(e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.String:
		if t.PkgPath() == "" {
			v.SetString("x")
		}
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Uint64, reflect.Uint32, reflect.Uint:
		if t.PkgPath() == "" {
			if v.CanInt() {
				v.SetInt(1)
			} else {
				v.SetUint(1)
			}
		}
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Bool:
		v.SetBool(true)
	}
}

func main() {
	out := os.Args[1]
	types := map[string]reflect.Type{
		"record_run": reflect.TypeFor[contracts.RunRecord](), "record_batch": reflect.TypeFor[contracts.BatchRecord](),
		"record_call": reflect.TypeFor[contracts.CallRecord](), "record_ticket": reflect.TypeFor[contracts.ResumeTicket](),
		"record_limit_ledger": reflect.TypeFor[contracts.LimitLedgerEntry](), "record_tool_pause": reflect.TypeFor[contracts.ToolPause](),
		contracts.TypeBatchRequested: reflect.TypeFor[contracts.BatchSubmission](), contracts.TypeBatchRejected: reflect.TypeFor[contracts.BatchRejected](),
		contracts.TypeBatchFinalized: reflect.TypeFor[contracts.BatchFinalized](), contracts.TypeToolResult: reflect.TypeFor[contracts.ToolResultEvent](),
		contracts.TypeBatchResults: reflect.TypeFor[contracts.BatchResults](), contracts.TypeTicketOpened: reflect.TypeFor[contracts.ResumeTicket](),
		contracts.TypeTicketResume: reflect.TypeFor[contracts.ResumeCommand](), contracts.TypeTicketResolved: reflect.TypeFor[contracts.TicketResolution](),
		contracts.TypeTicketRejected: reflect.TypeFor[contracts.TicketResolution](), contracts.TypeAgentEvent: reflect.TypeFor[contracts.AgentEvent](),
		contracts.TypeAudit: reflect.TypeFor[contracts.AuditRecord](), contracts.TypeToolProgress: reflect.TypeFor[contracts.ToolProgress](),
		contracts.TypeRunEnded: reflect.TypeFor[contracts.RunEndedEvent](), contracts.TypeToolPauseAudit: reflect.TypeFor[contracts.ToolPauseAudit](),
		contracts.TypeReconcileAudit: reflect.TypeFor[contracts.ReconcileAudit](), contracts.TypeMCPCallAudit: reflect.TypeFor[contracts.MCPCallAudit](),
		contracts.TypeTicketExpire: reflect.TypeFor[contracts.TicketTimer](), contracts.TypeRunCancel: reflect.TypeFor[contracts.RunCancel](),
		contracts.TypeCallCancel: reflect.TypeFor[contracts.CallCancel](), contracts.TypeCallResolve: reflect.TypeFor[contracts.CallResolve](),
		contracts.TypeResultCorrected: reflect.TypeFor[contracts.ResultCorrected](),
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		panic(err)
	}
	for name, t := range types {
		v := reflect.New(t)
		fill(v.Elem(), 0)
		b, err := json.MarshalIndent(v.Interface(), "", "  ")
		if err == nil {
			back := reflect.New(t)
			err = json.Unmarshal(b, back.Interface())
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: filled value does not round trip (%v): zero value\n", name, err)
			b, _ = json.MarshalIndent(reflect.New(t).Interface(), "", "  ")
		}
		if err := os.WriteFile(filepath.Join(out, name+".json"), append(b, '\n'), 0o644); err != nil {
			panic(err)
		}
	}
}
