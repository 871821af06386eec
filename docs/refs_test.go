// Package docs holds the project's design documents. Its test keeps them
// honest: every source file and function they name must exist.
package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// documents are the pages whose code references are checked.
var documents = []string{"architecture.md"}

var (
	// fileRef is a backticked Go file name; the backticked names that
	// follow it after a colon (`file.go`: `A`, `B.C`) must be declared in
	// it.
	fileRef = regexp.MustCompile("`([A-Za-z0-9_/.-]+\\.go)`")
	// namesAfter reads the list after a file reference: a colon, then
	// backticked identifiers separated by commas, each optionally
	// followed by a note in parentheses.
	namesAfter = regexp.MustCompile("^:\\s*((?:`[A-Za-z_][A-Za-z0-9_.]*`(?:\\s*\\([^)]*\\))?(?:,\\s*|\\s+and\\s+)?)+)")
	name       = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_.]*)`")
	// pkgRef is a backticked package path of this repository.
	pkgRef = regexp.MustCompile("`((?:pkg|cmd)/[A-Za-z0-9_/.-]+)`")
)

// TestCodeReferencesResolve checks each document's `file.go`: `Name`
// references. In a table row that names packages, the file is looked up in
// those packages; elsewhere any file of that name in the repository will
// do, as long as it declares every name given after it.
func TestCodeReferencesResolve(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	index := indexGoFiles(t, root)
	for _, doc := range documents {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		refs := 0
		for n, line := range strings.Split(string(data), "\n") {
			var dirs []string
			if strings.HasPrefix(line, "|") {
				for _, m := range pkgRef.FindAllStringSubmatch(line, -1) {
					dirs = append(dirs, m[1])
				}
			}
			for _, loc := range fileRef.FindAllStringSubmatchIndex(line, -1) {
				file := line[loc[2]:loc[3]]
				var names []string
				if m := namesAfter.FindStringSubmatch(line[loc[1]:]); m != nil {
					for _, nm := range name.FindAllStringSubmatch(m[1], -1) {
						names = append(names, nm[1])
					}
				}
				refs++
				if problem := resolve(index, dirs, file, names); problem != "" {
					t.Errorf("%s:%d: `%s`: %s", doc, n+1, file, problem)
				}
			}
		}
		if refs == 0 {
			t.Errorf("%s names no source file: the check would prove nothing", doc)
		}
	}
}

// goFile is what a source file declares.
type goFile struct {
	dir   string // relative to the repository root
	path  string // relative to the repository root
	names map[string]bool
}

// indexGoFiles parses every non-test Go file under pkg/ and cmd/ and keeps
// its top-level names: functions, types, constants and variables, and
// methods as Type.Method and by their own name.
func indexGoFiles(t *testing.T, root string) map[string][]goFile {
	t.Helper()
	index := map[string][]goFile{}
	fset := token.NewFileSet()
	for _, top := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			g := goFile{dir: filepath.Dir(rel), path: rel, names: declared(f)}
			index[filepath.Base(path)] = append(index[filepath.Base(path)], g)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return index
}

func declared(f *ast.File) map[string]bool {
	names := map[string]bool{}
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil || len(d.Recv.List) == 0 {
				names[d.Name.Name] = true
				continue
			}
			// A method is named with its type (Type.Method) or, where
			// the file's types leave no doubt, alone.
			names[receiverType(d.Recv.List[0].Type)+"."+d.Name.Name] = true
			names[d.Name.Name] = true
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					names[s.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names[n.Name] = true
					}
				}
			}
		}
	}
	return names
}

func receiverType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverType(x.X)
	case *ast.IndexExpr:
		return receiverType(x.X)
	case *ast.IndexListExpr:
		return receiverType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// resolve finds file (a base name, or a path relative to one of dirs) in
// dirs, or anywhere when dirs is empty, declaring every name; it returns
// what is wrong, or "".
func resolve(index map[string][]goFile, dirs []string, file string, names []string) string {
	candidates := index[filepath.Base(file)]
	if strings.Contains(file, "/") {
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(g goFile) bool {
			return !strings.HasSuffix(g.path, "/"+file) && g.path != file
		})
	}
	if len(dirs) > 0 {
		candidates = slices.DeleteFunc(slices.Clone(candidates), func(g goFile) bool {
			return !slices.ContainsFunc(dirs, func(d string) bool {
				return g.dir == d || strings.HasPrefix(g.dir, d+"/")
			})
		})
	}
	if len(candidates) == 0 {
		if len(dirs) > 0 {
			return "no such file in " + strings.Join(dirs, ", ")
		}
		return "no such file"
	}
	var missing []string
	for _, g := range candidates {
		missing = missing[:0]
		for _, n := range names {
			if !g.names[n] {
				missing = append(missing, n)
			}
		}
		if len(missing) == 0 {
			return ""
		}
	}
	return "does not declare " + strings.Join(missing, ", ")
}
