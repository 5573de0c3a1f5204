package storetest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestEverySuiteTestIsListed: every function of this package shaped like
// a suite test, func testX(*testing.T, store.Store), is in Tests(), so no
// conformance test is written and then never run against the drivers.
func TestEverySuiteTestIsListed(t *testing.T) {
	listed := map[string]bool{}
	for _, fn := range Tests() {
		name := runtime.FuncForPC(reflect.ValueOf(fn).Pointer()).Name()
		listed[name[strings.LastIndex(name, ".")+1:]] = true
	}
	pkgs, err := parser.ParseDir(token.NewFileSet(), ".", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Recv != nil || !strings.HasPrefix(fd.Name.Name, "test") || !suiteShaped(fd.Type) {
					continue
				}
				found++
				if !listed[fd.Name.Name] {
					t.Errorf("%s is a suite test but Tests() does not list it: it never runs", fd.Name.Name)
				}
			}
		}
	}
	if found != len(listed) {
		t.Errorf("%d suite-shaped functions, %d listed tests", found, len(listed))
	}
}

// suiteShaped reports whether ft is func(*testing.T, store.Store).
func suiteShaped(ft *ast.FuncType) bool {
	var types []string
	for _, p := range ft.Params.List {
		n := max(len(p.Names), 1)
		for range n {
			types = append(types, exprString(p.Type))
		}
	}
	return len(types) == 2 && types[0] == "*testing.T" && types[1] == "store.Store" && ft.Results == nil
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	case *ast.Ident:
		return e.Name
	}
	return ""
}
