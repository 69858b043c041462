package schemas

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/awaken-dev/awaken/pkg/contracts"
	"github.com/awaken-dev/awaken/pkg/httpapi"
)

// codeSubjects derives every subject the code publishes or consumes from the subject
// methods of contracts.Names (pkg/contracts/names.go): each method returning a string,
// except the stream, bucket, wildcard and filter names, is called with "{param}" for each
// parameter, the parameter named by its Go name in snake case (runID → {run_id}). The
// api's micro subjects come from its Endpoint constants.
func codeSubjects(t *testing.T, root string) []string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, "pkg", "contracts", "names.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := reflect.ValueOf(contracts.NewNames(contracts.DefaultPrefix))
	var subjects []string
	for _, decl := range f.Decls {
		fd, ok := decl.(*ast.FuncDecl)
		if !ok || fd.Recv == nil || !fd.Name.IsExported() || !returnsOneString(fd) {
			continue
		}
		if recv, ok := fd.Recv.List[0].Type.(*ast.Ident); !ok || recv.Name != "Names" {
			continue
		}
		name := fd.Name.Name
		if strings.HasSuffix(name, "Stream") || strings.HasSuffix(name, "Bucket") ||
			strings.HasSuffix(name, "Wildcard") || strings.HasSuffix(name, "Filter") ||
			strings.HasSuffix(name, "Prefix") { // the start of a family of subjects, none itself
			continue
		}
		m := names.MethodByName(name)
		var args []reflect.Value
		i := 0
		for _, field := range fd.Type.Params.List {
			for _, id := range field.Names {
				args = append(args, reflect.ValueOf("{"+snake(id.Name)+"}").Convert(m.Type().In(i)))
				i++
			}
		}
		subjects = append(subjects, m.Call(args)[0].String())
	}
	// The api's micro endpoints (request/reply under {prefix}.api.).
	for _, endpoint := range constsNamed(t, filepath.Join(root, "pkg", "httpapi"), "Endpoint") {
		subjects = append(subjects, httpapi.MicroSubject(contracts.DefaultPrefix, endpoint))
	}
	// A micro subject may be both an api endpoint and a contracts.Names method (the
	// client's side of the same request): one channel.
	sort.Strings(subjects)
	subjects = slices.Compact(subjects)
	if len(subjects) < 10 {
		t.Fatalf("found only %d subject methods in names.go: %v", len(subjects), subjects)
	}
	return subjects
}

func returnsOneString(fd *ast.FuncDecl) bool {
	r := fd.Type.Results
	if r == nil || len(r.List) != 1 || len(r.List[0].Names) > 1 {
		return false
	}
	id, ok := r.List[0].Type.(*ast.Ident)
	return ok && id.Name == "string"
}

// snake turns a Go parameter name into the protocol's: runID → run_id.
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 && !unicode.IsUpper(rune(s[i-1])) {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// codeEventTypes lists the values of every string constant of pkg/contracts that is a
// CloudEvent type (io.awaken.…).
func codeEventTypes(t *testing.T, root string) []string {
	t.Helper()
	var types []string
	stringConsts(parseDir(t, filepath.Join(root, "pkg", "contracts")), func(_, value string) {
		if strings.HasPrefix(value, "io.awaken.") {
			types = append(types, value)
		}
	})
	sort.Strings(types)
	if len(types) < 10 {
		t.Fatalf("found only %d event types in pkg/contracts: %v", len(types), types)
	}
	return types
}

type asyncAPIDoc struct {
	AsyncAPI string `yaml:"asyncapi"`
	Channels map[string]struct {
		Address    *string              `yaml:"address"`
		Messages   map[string]ref       `yaml:"messages"`
		Parameters map[string]yaml.Node `yaml:"parameters"`
	} `yaml:"channels"`
	Operations map[string]struct {
		Action   string `yaml:"action"`
		Channel  ref    `yaml:"channel"`
		Messages []ref  `yaml:"messages"`
		Reply    *struct {
			Channel ref `yaml:"channel"`
		} `yaml:"reply"`
	} `yaml:"operations"`
	Components struct {
		Messages map[string]struct {
			Headers struct {
				AllOf []struct {
					Properties struct {
						Type struct {
							Const string `yaml:"const"`
						} `yaml:"ce-type"`
					} `yaml:"properties"`
				} `yaml:"allOf"`
			} `yaml:"headers"`
			Payload ref `yaml:"payload"`
		} `yaml:"messages"`
		Parameters map[string]yaml.Node `yaml:"parameters"`
	} `yaml:"components"`
}

type ref struct {
	Ref string `yaml:"$ref"`
}

// checkReferences resolves every $ref of the document: "#/…" inside it, "../schemas/FILE"
// against the checked-in schemas.
func checkReferences(t *testing.T, raw []byte, schemas map[string][]byte) {
	t.Helper()
	var tree any
	if err := yaml.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				if r, ok := c.(string); ok && k == "$ref" {
					checkReference(t, tree, schemas, r)
					continue
				}
				walk(c)
			}
		case []any:
			for _, c := range x {
				walk(c)
			}
		}
	}
	walk(tree)
}

func checkReference(t *testing.T, tree any, schemas map[string][]byte, r string) {
	t.Helper()
	if file, ok := strings.CutPrefix(r, "../schemas/"); ok {
		if _, exists := schemas[file]; !exists {
			t.Errorf("$ref %q names no checked-in schema", r)
		}
		return
	}
	pointer, ok := strings.CutPrefix(r, "#/")
	if !ok {
		t.Errorf("$ref %q is neither local (#/…) nor a schema (../schemas/FILE)", r)
		return
	}
	node := tree
	for _, part := range strings.Split(pointer, "/") {
		m, ok := node.(map[string]any)
		if !ok {
			t.Errorf("$ref %q does not resolve", r)
			return
		}
		if node, ok = m[part]; !ok {
			t.Errorf("$ref %q does not resolve (no %q)", r, part)
			return
		}
	}
}

var addressParam = regexp.MustCompile(`\{([a-z_]+)\}`)

// TestAsyncAPIMatchesCode checks docs/asyncapi.yaml against the code: its channel
// addresses are exactly the subjects of contracts.Names, its message types exactly the
// CloudEvent types of pkg/contracts, every address parameter is declared, every reference
// resolves and every payload names a checked-in schema.
func TestAsyncAPIMatchesCode(t *testing.T) {
	root := moduleRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "docs", "asyncapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc asyncAPIDoc
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("docs/asyncapi.yaml: %v", err)
	}
	if doc.AsyncAPI != "3.0.0" {
		t.Errorf("asyncapi is %q, want 3.0.0", doc.AsyncAPI)
	}

	var addresses []string
	used := map[string]bool{}
	for name, ch := range doc.Channels {
		if ch.Address == nil {
			continue // a dynamic address (replies on an inbox): no subject of the code
		}
		addresses = append(addresses, *ch.Address)
		for _, m := range addressParam.FindAllStringSubmatch(*ch.Address, -1) {
			p, ok := ch.Parameters[m[1]]
			if !ok {
				t.Errorf("channel %s: address parameter {%s} is not declared", name, m[1])
				continue
			}
			var r ref
			if err := p.Decode(&r); err == nil && r.Ref != "" {
				if _, ok := doc.Components.Parameters[strings.TrimPrefix(r.Ref, "#/components/parameters/")]; !ok {
					t.Errorf("channel %s: parameter %s references %s, which does not exist", name, m[1], r.Ref)
				}
			}
		}
	}
	for name, ch := range doc.Channels {
		if len(ch.Messages) == 0 {
			t.Errorf("channel %s has no messages", name)
		}
	}
	sort.Strings(addresses)
	if want := codeSubjects(t, root); !slices.Equal(addresses, want) {
		t.Errorf("channel addresses differ from the subjects of contracts.Names:\n asyncapi: %v\n code:     %v", addresses, want)
	}

	for name, op := range doc.Operations {
		if op.Action != "send" && op.Action != "receive" {
			t.Errorf("operation %s: action %q is neither send nor receive", name, op.Action)
		}
		ch := strings.TrimPrefix(op.Channel.Ref, "#/channels/")
		if _, ok := doc.Channels[ch]; !ok {
			t.Errorf("operation %s: channel %q does not exist", name, op.Channel.Ref)
		}
		used[ch] = true
		if op.Reply != nil {
			used[strings.TrimPrefix(op.Reply.Channel.Ref, "#/channels/")] = true
		}
	}
	for name := range doc.Channels {
		if !used[name] {
			t.Errorf("channel %s has no operation (who sends or receives it?)", name)
		}
	}

	var types []string
	for _, m := range doc.Components.Messages {
		for _, part := range m.Headers.AllOf {
			if c := part.Properties.Type.Const; c != "" {
				types = append(types, c)
			}
		}
	}
	checkReferences(t, raw, checkedIn(t, root))
	sort.Strings(types)
	if want := codeEventTypes(t, root); !slices.Equal(types, want) {
		t.Errorf("message types (ce-type consts) differ from the CloudEvent types of pkg/contracts:\n asyncapi: %v\n code:     %v", types, want)
	}
}
