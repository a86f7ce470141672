package archmap

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/jetlet/jetlet"

// row is one line of docs/architecture.md's package table.
type row struct {
	line     int
	pkgs     []string // column 1, relative to the module
	imports  []string // jetlet packages column 3 names as imported
	never    []string // jetlet packages column 3 names after "never" or "no"
	anything bool     // column 3 says "everything below": not checked
	children bool     // column 3 says "its subpackages": any under the row's package
}

// TestArchitectureMap fails when a package table row of docs/architecture.md
// disagrees with `go list`: a jetlet package a package imports that its row
// does not name, one its row names that it does not import (or must never
// import and does), a row naming a package that does not exist, or a
// package outside test/ with no row at all; a path in the drawing that
// names no package, or a backticked file or directory that is gone. Packages outside jetlet (the
// standard library, nats.go, grpc, ...) are the prose's, not checked.
func TestArchitectureMap(t *testing.T) {
	root := moduleRoot(t)
	imports := goListImports(t, root)
	doc := filepath.Join(root, "docs", "architecture.md")
	rows := parseMap(t, doc, imports)
	if len(rows) < 40 {
		t.Fatalf("docs/architecture.md: found %d package rows, want the whole table (has its format changed?)", len(rows))
	}
	isDir := func(p string) bool {
		st, err := os.Stat(filepath.Join(root, p))
		return err == nil && st.IsDir()
	}
	for _, err := range checkMap(rows, imports, isDir) {
		t.Error(err)
	}
	for _, err := range checkDiagram(t, doc, imports, isDir) {
		t.Error(err)
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range filePath.FindAllStringSubmatch(string(data), -1) {
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			t.Errorf("docs/architecture.md names %s, which is not in the repository", m[1])
		}
	}
}

// filePath is a backticked file or directory of the repository named from
// its top: `cmd/jetlet/client/natsconfig.go`, `internal/safepath`.
var filePath = regexp.MustCompile("`((?:cmd|consumer|events|internal|reconcile|runtime|schemas|test|deploy|docs)(?:/[A-Za-z0-9_-]+)*(?:/[A-Za-z0-9_-]+\\.go)?)`")

var diagramPath = regexp.MustCompile(`\b(?:cmd|consumer|events|internal|reconcile|runtime|schemas|test)(?:/[A-Za-z0-9_-]+)+`)

// checkDiagram returns an error for each path in the map's drawing (its
// first code block) that names no package or directory of the module.
func checkDiagram(t *testing.T, path string, imports map[string][]string, isDir func(string) bool) []error {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n```\n")
	drawing, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("docs/architecture.md: no drawing (a code block) found")
	}
	var errs []error
	for _, p := range diagramPath.FindAllString(drawing, -1) {
		if _, ok := imports[p]; !ok && !isDir(p) {
			errs = append(errs, fmt.Errorf("docs/architecture.md: the drawing names %s, which is no package of the module", p))
		}
	}
	return errs
}

// checkMap returns each disagreement between the rows and imports (a
// package's jetlet imports, relative to the module); isDir says whether a
// row's name that is no package is at least a directory (test/vm).
func checkMap(rows []row, imports map[string][]string, isDir func(string) bool) []error {
	var errs []error
	seen := map[string]bool{}
	for _, r := range rows {
		claimed := map[string]bool{}
		for _, c := range r.imports {
			claimed[c] = true
		}
		used := map[string]bool{}
		for _, p := range r.pkgs {
			seen[p] = true
			got, ok := imports[p]
			if !ok {
				if !isDir(p) {
					errs = append(errs, fmt.Errorf("docs/architecture.md:%d: %s is no package of the module (renamed or gone?)", r.line, p))
				}
				continue
			}
			if got == nil {
				continue
			}
			for _, imp := range got {
				used[imp] = true
				switch {
				case slices.Contains(r.never, imp):
					errs = append(errs, fmt.Errorf("docs/architecture.md:%d: %s imports %s, which its row says it never does", r.line, p, imp))
				case r.anything || claimed[imp] || r.children && strings.HasPrefix(imp, p+"/"):
				default:
					errs = append(errs, fmt.Errorf("docs/architecture.md:%d: %s imports %s, which its row does not name", r.line, p, imp))
				}
			}
		}
		for _, c := range r.imports {
			if !used[c] && len(r.pkgs) > 0 && hasPackage(imports, r.pkgs) {
				errs = append(errs, fmt.Errorf("docs/architecture.md:%d: the row of %s names %s, which it does not import", r.line, strings.Join(r.pkgs, ", "), c))
			}
		}
	}
	for p := range imports {
		if !seen[p] && !strings.HasPrefix(p, "test/") {
			errs = append(errs, fmt.Errorf("docs/architecture.md: no row for package %s", p))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

func hasPackage(imports map[string][]string, pkgs []string) bool {
	for _, p := range pkgs {
		if imports[p] != nil {
			return true
		}
	}
	return false
}

var backticked = regexp.MustCompile("`([^`]+)`")

// parseMap reads the package table: the rows whose first column is one or
// more backticked paths. In the third column a jetlet package's path (of
// those go list knows) is a claim, "never P", "no P" or "nothing under P" a prohibition.
func parseMap(t *testing.T, path string, imports map[string][]string) []row {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	known := make([]string, 0, len(imports))
	for p := range imports {
		known = append(known, regexp.QuoteMeta(p))
	}
	// Longest first, so that schemas/natsjs is not read as schemas.
	slices.SortFunc(known, func(a, b string) int { return len(b) - len(a) })
	pkgRef := regexp.MustCompile(`(?:^|[^A-Za-z0-9_/.-])((?:never |no |nothing under )?)(` + strings.Join(known, "|") + `)(?:$|[^A-Za-z0-9_/-])`)
	var rows []row
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		cols := strings.Split(sc.Text(), " | ")
		if len(cols) != 3 || !strings.HasPrefix(cols[0], "| `") {
			continue
		}
		r := row{line: n}
		for _, m := range backticked.FindAllStringSubmatch(cols[0], -1) {
			r.pkgs = append(r.pkgs, m[1])
		}
		col := strings.TrimSuffix(cols[2], " |")
		r.anything = strings.Contains(col, "everything below")
		r.children = strings.Contains(col, "its subpackages")
		// Overlapping matches share a separator: scan from each match's end minus one.
		for rest := strings.ReplaceAll(col, "*", ""); ; {
			loc := pkgRef.FindStringSubmatchIndex(rest)
			if loc == nil {
				break
			}
			name := rest[loc[4]:loc[5]]
			if loc[3] > loc[2] {
				r.never = append(r.never, name)
			} else if !slices.Contains(r.imports, name) {
				r.imports = append(r.imports, name)
			}
			rest = rest[loc[5]:]
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// goListImports returns each package of the module with the jetlet packages
// it imports (not its tests'), relative to the module; nil for a package of
// tests only.
func goListImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-tags", "jetlet_vm", "-f", `{{.ImportPath}}|{{join .Imports " "}}|{{len .GoFiles}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		p, ok := relative(f[0])
		if !ok {
			continue
		}
		if f[2] == "0" {
			m[p] = nil // tests only (a suite): nothing to check but its name
			continue
		}
		own := []string{}
		for _, imp := range strings.Fields(f[1]) {
			if rel, ok := relative(imp); ok && rel != p && !slices.Contains(own, rel) {
				own = append(own, rel)
			}
		}
		m[p] = own
	}
	return m
}

func relative(p string) (string, bool) {
	if rel, ok := strings.CutPrefix(p, module+"/"); ok {
		return rel, true
	}
	return "", false
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
