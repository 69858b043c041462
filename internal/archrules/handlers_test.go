package archrules

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// handlerShapes lists every place in a non-test Go file of the tree at root (laid out like
// the module, walked by [findInGoFiles]) that breaks the one handler shape:
//   - outside internal/bus, a switch on a delivery's Event.Type, or an == or != with it
//     on one side: the consumer's type filter (ConsumerSpec.AcceptTypes, or Route.ByType,
//     which also hands each type to its own handler) is the only type check, and whether
//     the envelope decoded at all is Delivery.EnvelopeDecoded. Reading the type (logs,
//     telemetry, error messages) is fine. A delivery is a name declared as a bus.Delivery
//     (or *bus.Delivery) — a parameter of the function around the expression or of one
//     around that, a var, or a := of a bus.Delivery literal — so a value of another type
//     that also has an Event (a stored message a test helper reads back) is not one;
//   - a bus.Route whose Handler or ByType value, or a handler passed to bus.Consume, is
//     not the effects runtime's handler of a named function or method value
//     (env.Handle(service, h)): every handler decides and returns its effects, and the
//     runtime (internal/pipeline effects.go) commits, publishes and reaches the fault
//     points; a func literal or another adapter would be a second handler shape.
//
// Unkeyed bus.Route literals are not looked into: go vet refuses them.
func handlerShapes(t *testing.T, root string) []string {
	t.Helper()
	return findInGoFiles(t, root, func(rel string, f *ast.File, report func(token.Pos, string)) {
		bus, ok := importName(f, module+"/internal/bus")
		if !ok {
			return
		}
		if !strings.HasPrefix(rel, "internal/bus/") {
			for _, decl := range f.Decls {
				if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
					typeChecks(bus, fn.Type, fn.Body, nil, report)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				switch typ := n.Type.(type) {
				case *ast.SelectorExpr:
					if isQualified(typ, bus, "Route") {
						routeHandlers(n, report)
					}
				case *ast.ArrayType: // []bus.Route{{…}, …}: the elements' type is elided
					if isQualified(unstar(typ.Elt), bus, "Route") {
						for _, e := range n.Elts {
							if lit, ok := e.(*ast.CompositeLit); ok && lit.Type == nil {
								routeHandlers(lit, report)
							}
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && isQualified(sel, bus, "Consume") && len(n.Args) == 5 {
					namedHandler(n.Args[3], "bus.Consume's handler", report)
				}
			}
			return true
		})
	})
}

// typeChecks reports every switch on, or comparison with, the Event.Type of a delivery in
// body: one of outer (the deliveries of the functions around it) or of the function's own,
// declared by its parameters or in body. A func literal in body is looked into with the
// deliveries known at it.
func typeChecks(bus string, fn *ast.FuncType, body *ast.BlockStmt, outer []string, report func(token.Pos, string)) {
	deliveries := slices.Clone(outer)
	for _, field := range fn.Params.List {
		if isQualified(unstar(field.Type), bus, "Delivery") {
			for _, name := range field.Names {
				deliveries = append(deliveries, name.Name)
			}
		}
	}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			if n.Type != nil && isQualified(unstar(n.Type), bus, "Delivery") {
				for _, name := range n.Names {
					deliveries = append(deliveries, name.Name)
				}
			}
		case *ast.AssignStmt:
			for i, rhs := range n.Rhs {
				if lit, ok := ast.Unparen(rhs).(*ast.CompositeLit); ok && n.Tok == token.DEFINE && i < len(n.Lhs) && isQualified(lit.Type, bus, "Delivery") {
					if id, ok := n.Lhs[i].(*ast.Ident); ok {
						deliveries = append(deliveries, id.Name)
					}
				}
			}
		}
		return true
	})
	isType := func(e ast.Expr) bool {
		typ, ok := ast.Unparen(e).(*ast.SelectorExpr)
		if !ok || typ.Sel.Name != "Type" {
			return false
		}
		ev, ok := typ.X.(*ast.SelectorExpr)
		if !ok || ev.Sel.Name != "Event" {
			return false
		}
		d, ok := ev.X.(*ast.Ident)
		return ok && slices.Contains(deliveries, d.Name)
	}
	const why = " (the consumer's type filter is the only type check: route several types with bus.Route.ByType)"
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncLit:
			typeChecks(bus, n.Type, n.Body, deliveries, report)
			return false
		case *ast.SwitchStmt:
			if n.Tag != nil && isType(n.Tag) {
				report(n.Pos(), "switches on a delivery's Event.Type"+why)
			}
		case *ast.BinaryExpr:
			if (n.Op == token.EQL || n.Op == token.NEQ) && (isType(n.X) || isType(n.Y)) {
				report(n.Pos(), "compares a delivery's Event.Type"+why)
			}
		}
		return true
	})
}

// routeHandlers reports the handlers of a bus.Route literal that are not named: its
// Handler, and the values of its ByType map when that is a literal.
func routeHandlers(route *ast.CompositeLit, report func(token.Pos, string)) {
	for _, e := range route.Elts {
		kv, ok := e.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		key, ok := kv.Key.(*ast.Ident)
		if !ok {
			continue
		}
		switch key.Name {
		case "Handler":
			namedHandler(kv.Value, "a bus.Route's Handler", report)
		case "ByType":
			if m, ok := ast.Unparen(kv.Value).(*ast.CompositeLit); ok {
				for _, e := range m.Elts {
					if kv, ok := e.(*ast.KeyValueExpr); ok {
						namedHandler(kv.Value, "a bus.Route's ByType handler", report)
					}
				}
			}
		}
	}
}

// handlerWhy says what a route's handler must be.
const handlerWhy = " (a handler returns its effects: env.Handle(service, h), h a named function or method value of the shape func(ctx, bus.Delivery) (pipeline.Effects, error))"

// namedHandler reports h, the handler given as what, unless it is built by the effects
// runtime from a named handler: a call of a method or function named Handle whose last
// argument is a named function or method value (pipeline.Env.Handle(service, h)).
func namedHandler(h ast.Expr, what string, report func(token.Pos, string)) {
	switch h := ast.Unparen(h).(type) {
	case *ast.CallExpr:
		var name string
		switch fn := h.Fun.(type) {
		case *ast.Ident:
			name = fn.Name
		case *ast.SelectorExpr:
			name = fn.Sel.Name
		}
		if name != "Handle" || len(h.Args) == 0 {
			report(h.Pos(), what+" is not built by the effects runtime"+handlerWhy)
			return
		}
		switch last := ast.Unparen(h.Args[len(h.Args)-1]).(type) {
		case *ast.Ident, *ast.SelectorExpr:
		case *ast.FuncLit:
			report(last.Pos(), what+" runs a func literal"+handlerWhy)
		default:
			report(last.Pos(), what+" runs a handler that is not a named function or method value"+handlerWhy)
		}
	case *ast.FuncLit:
		report(h.Pos(), what+" is a func literal"+handlerWhy)
	default:
		report(h.Pos(), what+" is not built by the effects runtime"+handlerWhy)
	}
}

// importName returns the name f refers to the package path by, if f imports it by a name.
func importName(f *ast.File, path string) (string, bool) {
	for _, imp := range f.Imports {
		if p, err := strconv.Unquote(imp.Path.Value); err != nil || p != path {
			continue
		}
		if imp.Name == nil {
			return path[strings.LastIndex(path, "/")+1:], true
		}
		if imp.Name.Name == "_" || imp.Name.Name == "." {
			return "", false
		}
		return imp.Name.Name, true
	}
	return "", false
}

// isQualified reports whether e is pkg.name.
func isQualified(e ast.Expr, pkg, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// unstar returns what the pointer type e points to, or e.
func unstar(e ast.Expr) ast.Expr {
	if star, ok := e.(*ast.StarExpr); ok {
		return star.X
	}
	return e
}

func TestEveryHandlerHasOneShape(t *testing.T) {
	noFindings(t, "handlers of another shape, or type checks after the consumer's", handlerShapes(t, moduleRoot))
}

// TestTheHandlerCheckFindsOtherShapes runs the check on a tree whose service switches on
// and compares a delivery's type (a parameter, a pointer, a var, a := literal, from a
// closure) and routes to func literals and to handlers built by a call, as does a package
// that imports the bus under another name; the bus's own code, reading the type,
// comparing the type of something that is not a delivery, and a test file doing all of it
// are allowed.
func TestTheHandlerCheckFindsOtherShapes(t *testing.T) {
	const typeWhy = " (the consumer's type filter is the only type check: route several types with bus.Route.ByType)"
	sameFindings(t, handlerShapes(t, filepath.Join("testdata", "handlers")), []string{
		"internal/kit/kit.go:11 compares a delivery's Event.Type" + typeWhy,
		"internal/kit/kit.go:14 a bus.Route's Handler is a func literal" + handlerWhy,
		"services/x/x.go:24 switches on a delivery's Event.Type" + typeWhy,
		"services/x/x.go:28 compares a delivery's Event.Type" + typeWhy,
		"services/x/x.go:28 compares a delivery's Event.Type" + typeWhy,
		"services/x/x.go:38 compares a delivery's Event.Type" + typeWhy,
		"services/x/x.go:38 compares a delivery's Event.Type" + typeWhy,
		"services/x/x.go:39 compares a delivery's Event.Type" + typeWhy,
		"services/x/x.go:53 a bus.Route's Handler is not built by the effects runtime" + handlerWhy,
		"services/x/x.go:55 a bus.Route's ByType handler is not built by the effects runtime" + handlerWhy,
		"services/x/x.go:56 a bus.Route's Handler is a func literal" + handlerWhy,
		"services/x/x.go:57 a bus.Route's ByType handler is not built by the effects runtime" + handlerWhy,
		"services/x/x.go:58 a bus.Route's Handler runs a func literal" + handlerWhy,
		"services/x/x.go:59 a bus.Route's Handler runs a handler that is not a named function or method value" + handlerWhy,
		"services/x/x.go:61 a bus.Route's Handler is not built by the effects runtime" + handlerWhy,
		"services/x/x.go:62 a bus.Route's ByType handler is a func literal" + handlerWhy,
		"services/x/x.go:63 bus.Consume's handler is not built by the effects runtime" + handlerWhy,
		"services/x/x.go:64 bus.Consume's handler is a func literal" + handlerWhy,
	})
}
