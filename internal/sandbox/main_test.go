package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/awaken-dev/awaken/internal/sandbox/sandboxtest/wasmbuild"
)

// modulePackages are the Go packages the tests run as WebAssembly, by output name.
var modulePackages = []string{
	"../../examples/sandbox-tools/wc",
	"../../examples/sandbox-tools/sha256",
	"../../examples/sandbox-tools/jsonq",
	"./testdata/probe",
	"./testdata/hostile/readfile",
	"./testdata/hostile/socket",
	"./testdata/hostile/loop",
	"./testdata/hostile/sleep",
	"./testdata/hostile/membomb",
	"./testdata/hostile/bigoutput",
	"./testdata/hostile/trap",
	"./testdata/hostile/exitcode",
}

// Set once by TestMain and read-only afterwards.
var (
	// moduleDir holds the built .wasm files, named after their package directory.
	moduleDir string
	// sharedCacheDir is a compilation cache shared by the tests' engines: TestMain
	// compiles every module into it once, outside the race detector, and holds them in
	// memory, so no test compiles a Go-built module again (see precompileModules).
	sharedCacheDir string
)

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "awaken-sandbox-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox tests:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	moduleDir = filepath.Join(dir, "modules")
	sharedCacheDir = filepath.Join(dir, "cache")
	// Every test module in one go build: the go command builds them in parallel on a shared
	// cache, a few seconds even on a small machine.
	if err := wasmbuild.Build(moduleDir, modulePackages...); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox tests: building the WebAssembly test modules:", err)
		return 1
	}
	hold, err := precompileModules(sharedCacheDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox tests: precompiling the WebAssembly test modules:", err)
		return 1
	}
	defer hold.Close(context.Background())
	return m.Run()
}

// precompileModules fills the compilation cache dir with every built module in a
// process without the race detector (about a second per module, against 15-30 s under
// -race; [wasmbuild.Precompile], as sandboxtest, which this package cannot import, does).
// It then loads them into an engine that holds them in memory until it is closed, so
// every engine on dir shares them.
func precompileModules(dir string) (*Engine, error) {
	var modules []string
	for _, pkg := range modulePackages {
		modules = append(modules, modulePath(filepath.Base(pkg)))
	}
	if err := wasmbuild.Precompile(dir, modules...); err != nil {
		return nil, err
	}
	ctx := context.Background()
	hold, err := NewEngine(ctx, EngineOptions{CacheDir: dir})
	if err != nil {
		return nil, err
	}
	for _, path := range modules {
		if err := hold.Load(ctx, path, ModuleConfig{Path: path}); err != nil {
			return nil, errors.Join(err, hold.Close(ctx))
		}
	}
	return hold, nil
}

// modulePath is the built module of the package whose directory is name.
func modulePath(name string) string { return filepath.Join(moduleDir, name) }

// newTestEngine creates an engine on the shared compilation cache and closes it when
// the test ends.
func newTestEngine(t testing.TB, opts EngineOptions) *Engine {
	t.Helper()
	if opts.CacheDir == "" {
		opts.CacheDir = sharedCacheDir
	}
	e, err := NewEngine(context.Background(), opts)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// mustLoad loads the built module name as toolID.
func mustLoad(t testing.TB, e *Engine, toolID, name string, cfg ModuleConfig) {
	t.Helper()
	cfg.Path = modulePath(name)
	if err := e.Load(context.Background(), toolID, cfg); err != nil {
		t.Fatalf("Load %s: %v", toolID, err)
	}
}

// writeModule writes binary to a file in a temporary directory and returns its path.
func writeModule(t testing.TB, name string, binary []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".wasm")
	if err := os.WriteFile(path, binary, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// asModuleError returns err as a *ModuleError or fails the test.
func asModuleError(t testing.TB, err error) *ModuleError {
	t.Helper()
	var me *ModuleError
	if !errors.As(err, &me) {
		t.Fatalf("error %v (%T) is not a *ModuleError", err, err)
	}
	return me
}

// A minimal WebAssembly assembler for hand-made test modules, so the tests can exercise
// what Go cannot produce (a real trap, a foreign import, a huge initial memory).

// uleb encodes n as unsigned LEB128 with the engine's own encoder: wazero, which decodes
// every hand-made module, checks it.
func uleb(n int) []byte { return appendULEB32(nil, uint32(n)) }

func concat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func vec(items ...[]byte) []byte { return concat(uleb(len(items)), concat(items...)) }

func wasmName(s string) []byte { return concat(uleb(len(s)), []byte(s)) }

func section(id byte, payload []byte) []byte { return concat([]byte{id}, uleb(len(payload)), payload) }

// wasmSpec describes a hand-made module: one function type per entry of types, imported
// functions, defined functions (type index and body instructions), an optional memory
// and exports.
type wasmSpec struct {
	types      [][]byte // each a full functype encoding
	imports    []wasmImport
	funcs      []wasmFunc
	memoryMin  int      // pages; -1 for no memory
	tables     [][]byte // each a full tabletype encoding (see tableType)
	exportFunc map[string]int
	exportMem  string
	start      int // index of the start function, or -1 for none
}

type wasmImport struct {
	module, name string
	typeIdx      int
}

type wasmFunc struct {
	typeIdx int
	body    []byte // instructions without the final end
}

// funcType encodes a function type with i32 params and results.
func funcType(params, results int) []byte {
	i32s := func(n int) []byte {
		out := uleb(n)
		for range n {
			out = append(out, 0x7f)
		}
		return out
	}
	return concat([]byte{0x60}, i32s(params), i32s(results))
}

func (s wasmSpec) encode() []byte {
	out := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	out = append(out, section(1, vec(s.types...))...)
	if len(s.imports) > 0 {
		var imps [][]byte
		for _, imp := range s.imports {
			imps = append(imps, concat(wasmName(imp.module), wasmName(imp.name), []byte{0x00}, uleb(imp.typeIdx)))
		}
		out = append(out, section(2, vec(imps...))...)
	}
	var fidx, bodies [][]byte
	for _, f := range s.funcs {
		fidx = append(fidx, uleb(f.typeIdx))
		code := concat([]byte{0x00}, f.body, []byte{0x0b})
		bodies = append(bodies, concat(uleb(len(code)), code))
	}
	out = append(out, section(3, vec(fidx...))...)
	if len(s.tables) > 0 {
		out = append(out, section(4, vec(s.tables...))...)
	}
	if s.memoryMin >= 0 {
		out = append(out, section(5, vec(concat([]byte{0x00}, uleb(s.memoryMin))))...)
	}
	var exps [][]byte
	for name, idx := range s.exportFunc {
		exps = append(exps, concat(wasmName(name), []byte{0x00}, uleb(idx)))
	}
	if s.exportMem != "" {
		exps = append(exps, concat(wasmName(s.exportMem), []byte{0x02}, uleb(0)))
	}
	out = append(out, section(7, vec(exps...))...)
	if s.start >= 0 {
		out = append(out, section(8, uleb(s.start))...)
	}
	out = append(out, section(10, vec(bodies...))...)
	return out
}

// Instructions.
var (
	opUnreachable = []byte{0x00}
	opNop         = []byte{0x01}
)

// opCall calls function idx.
func opCall(idx int) []byte { return concat([]byte{0x10}, uleb(idx)) }

// commandSpec is a well-formed WASI command whose _start runs body.
func commandSpec(body []byte) wasmSpec {
	return wasmSpec{
		types:      [][]byte{funcType(0, 0)},
		funcs:      []wasmFunc{{typeIdx: 0, body: body}},
		memoryMin:  1,
		exportFunc: map[string]int{"_start": 0},
		exportMem:  "memory",
		start:      -1,
	}
}
