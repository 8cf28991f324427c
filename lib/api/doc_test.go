// Package api_test checks what every package under lib/api owes a reader:
// the wire types are the contract between the daemons and their clients,
// so each exported name and each field carries its own comment (unit,
// range, what zero means), and each error code is listed in the
// documentation a caller reads.
package api_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/matryer/is"
	"hostkit.dev/lib/api/egressdapi"
	"hostkit.dev/lib/api/helperapi"
	"hostkit.dev/lib/api/secretdapi"
	"hostkit.dev/lib/api/supervisordapi"
)

// apiDirs returns the package directories under lib/api, sorted.
func apiDirs(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() && e.Name() != "testdata" {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) == 0 {
		t.Fatal("no package directories under lib/api")
	}
	return dirs
}

// TestEveryNameDocumented fails naming each exported type, struct field,
// function, method, constant or variable in lib/api that has neither a
// doc comment nor a line comment. A name inside a documented const or var
// group still needs its own: "Op names." says what the group is, not what
// each op does or which role may call it.
func TestEveryNameDocumented(t *testing.T) {
	t.Parallel()
	for _, dir := range apiDirs(t) {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			files, err := filepath.Glob(filepath.Join(dir, "*.go"))
			is.NoErr(err)
			fset := token.NewFileSet()
			n, pkgDoc := 0, false
			for _, name := range files {
				if strings.HasSuffix(name, "_test.go") {
					continue
				}
				f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
				is.NoErr(err)
				n++
				pkgDoc = pkgDoc || f.Doc != nil
				for _, miss := range undocumented(fset, f) {
					t.Errorf("%s has no doc comment", miss)
				}
			}
			is.True(n > 0) // a directory without Go files would pass unchecked
			if !pkgDoc {
				t.Errorf("%s: the package has no package comment", dir)
			}
		})
	}
}

// undocumented lists "file:line: what Name" for each exported name of f
// without a comment.
func undocumented(fset *token.FileSet, f *ast.File) []string {
	var out []string
	miss := func(pos token.Pos, what, name string) {
		p := fset.Position(pos)
		out = append(out, fmt.Sprintf("%s:%d: %s %s", p.Filename, p.Line, what, name))
	}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			name := d.Name.Name
			if d.Recv != nil {
				recv := receiverName(d.Recv.List[0].Type)
				if !ast.IsExported(recv) {
					continue // a method of an unexported type is not API
				}
				name = recv + "." + name
			}
			miss(d.Pos(), "func", name)
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					if s.Doc == nil && s.Comment == nil && (d.Doc == nil || len(d.Specs) > 1) {
						miss(s.Pos(), "type", s.Name.Name)
					}
					if st, ok := s.Type.(*ast.StructType); ok {
						out = append(out, fields(fset, s.Name.Name, st)...)
					}
				case *ast.ValueSpec:
					kind := "const"
					if d.Tok == token.VAR {
						kind = "var"
					}
					for _, id := range s.Names {
						if !id.IsExported() {
							continue
						}
						if s.Doc == nil && s.Comment == nil && (d.Doc == nil || len(d.Specs) > 1) {
							miss(id.Pos(), kind, id.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// fields lists the exported fields of st (and of the structs nested in
// it) that have neither a doc comment nor a line comment.
func fields(fset *token.FileSet, typ string, st *ast.StructType) []string {
	var out []string
	for _, fld := range st.Fields.List {
		if inner, ok := fld.Type.(*ast.StructType); ok {
			out = append(out, fields(fset, typ, inner)...)
		}
		if fld.Doc != nil || fld.Comment != nil {
			continue
		}
		for _, id := range fld.Names {
			if id.IsExported() {
				p := fset.Position(id.Pos())
				out = append(out, fmt.Sprintf("%s:%d: field %s.%s", p.Filename, p.Line, typ, id.Name))
			}
		}
	}
	return out
}

// receiverName returns the type name of a method receiver (T, *T, T[P]).
func receiverName(e ast.Expr) string {
	switch r := e.(type) {
	case *ast.StarExpr:
		return receiverName(r.X)
	case *ast.IndexExpr:
		return receiverName(r.X)
	case *ast.IndexListExpr:
		return receiverName(r.X)
	case *ast.Ident:
		return r.Name
	}
	return ""
}

// TestUndocumentedFound keeps TestEveryNameDocumented honest: a source
// with a bare exported type, field, method, function, constant and
// variable yields one finding for each, and their documented twins none.
func TestUndocumentedFound(t *testing.T) {
	t.Parallel()
	is := is.New(t)
	const src = `package p

type Bare struct {
	Field int
	// Doc is documented.
	Doc   int
	Line  int // documented
	inner int
}

// Documented is documented.
type Documented struct{ Nested struct{ Deep int } }

func (Bare) Method() {}

func (b *Bare) unexported() {}

type hidden struct{}

func (hidden) Method() {}

func Func() {}

const (
	// A is documented.
	A = 1
	B = 2
	C = 3 // documented
)

// One is a documented group of one.
const One = 1

var V int
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	is.NoErr(err)
	got := undocumented(fset, f)
	want := []string{
		"p.go:3: type Bare",
		"p.go:4: field Bare.Field",
		"p.go:12: field Documented.Nested",
		"p.go:12: field Documented.Deep", // nested: named by the outer type
		"p.go:14: func Bare.Method",
		"p.go:22: func Func",
		"p.go:27: const B",
		"p.go:34: var V",
	}
	slices.Sort(got)
	slices.Sort(want)
	is.Equal(got, want)
}

// TestCodesDocumented checks that every error code of every daemon API is
// listed, in backquotes, in the document its codes.go names: codes are
// API, and a caller reads the list there.
func TestCodesDocumented(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		codes []string
		doc   string
	}{
		{name: "egressdapi", codes: egressdapi.Codes, doc: "docs/protocol.md"},
		{name: "helperapi", codes: helperapi.Codes, doc: "docs/protocol.md"},
		{name: "secretdapi", codes: secretdapi.Codes, doc: "docs/protocol.md"},
		{name: "supervisordapi", codes: supervisordapi.Codes, doc: "docs/supervisord.md"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			is := is.New(t)
			doc, err := os.ReadFile(filepath.Join("..", "..", tt.doc))
			is.NoErr(err)
			is.True(len(tt.codes) > 0)
			for _, c := range tt.codes {
				if !bytes.Contains(doc, []byte("`"+c+"`")) {
					t.Errorf("%s does not list %s", tt.doc, c)
				}
			}
		})
	}
}
