// Command layers checks that this module's packages import each other only
// downwards, through the layers docs/architecture.md draws:
//
//	cmd, hack, test, deploy     binaries, build tools, cross-package tests, manifests
//	internal/dev                tooling: stratus dev, bench, conformance drivers, test environments
//	pkg/app                     the front door: the stratus-ccm command
//	internal                    the manager: controllers, cloud layer, webhook
//	providers                   providers compiled into the manager
//	minicloud, vcsim            simulated clouds (providers use minicloud's API and client)
//	pkg                         the public surface for provider authors
//	proto                       the plugin protocol's generated code
//
// A package may import its own layer and the layers below it that its rule
// lists; everything else is an arrow running back up. Only non-test imports
// count: tests may use the test environments of internal/dev. A test-helper
// package (its name ends in "test", like net/http/httptest) may import
// anything, and only tests and other test helpers may import it.
//
// make lint runs it; it prints each arrow that runs back up and exits 1.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// module is the module path this command checks.
const module = "github.com/stratus-ccm/stratus"

// rule says what the packages under a prefix may import of this module.
type rule struct {
	prefix string   // the packages it applies to (the longest prefix wins)
	may    []string // prefixes they may import; their own prefix always
}

// rules are the layers, from the top.
var rules = []rule{
	{prefix: "cmd", may: []string{""}},
	{prefix: "hack", may: []string{""}},
	{prefix: "test", may: []string{""}},
	{prefix: "deploy", may: []string{""}},
	{prefix: "internal/dev", may: []string{"internal", "pkg", "providers", "minicloud", "vcsim", "proto", "deploy/mixin"}},
	{prefix: "pkg/app", may: []string{"internal/cloud", "internal/manager", "pkg", "providers", "proto"}},
	{prefix: "internal", may: []string{"pkg/annotations", "pkg/echo", "pkg/plugin", "pkg/stratus", "proto"}},
	{prefix: "providers", may: []string{"minicloud/api", "minicloud/client", "pkg/annotations", "pkg/echo", "pkg/stratus", "pkg/plugin", "proto"}},
	{prefix: "minicloud", may: nil},
	{prefix: "vcsim", may: nil},
	{prefix: "pkg", may: []string{"proto"}},
	{prefix: "proto", may: nil},
}

func main() {
	pkgs, err := list()
	if err != nil {
		fmt.Fprintln(os.Stderr, "layers:", err)
		os.Exit(2)
	}
	bad := check(pkgs)
	for _, b := range bad {
		fmt.Println(b)
	}
	if len(bad) > 0 {
		fmt.Printf("layers: %d imports run back up (hack/layers says which way they may run)\n", len(bad))
		os.Exit(1)
	}
}

// pkg is a package of the module and what it imports of the module, by
// path relative to the module.
type pkg struct {
	path    string
	imports []string
}

// list lists the module's packages with go list.
func list() ([]pkg, error) {
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []pkg
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "|")
		if len(f) != 2 {
			return nil, fmt.Errorf("go list: unexpected line %q", sc.Text())
		}
		p := pkg{path: rel(f[0])}
		for _, imp := range strings.Fields(f[1]) {
			if r := rel(imp); r != "" {
				p.imports = append(p.imports, r)
			}
		}
		pkgs = append(pkgs, p)
	}
	return pkgs, sc.Err()
}

// rel returns an import path of the module relative to it, "" for others.
func rel(path string) string {
	if path == module {
		return "."
	}
	r, ok := strings.CutPrefix(path, module+"/")
	if !ok {
		return ""
	}
	return r
}

// check returns one line per import that runs back up.
func check(pkgs []pkg) []string {
	var bad []string
	for _, p := range pkgs {
		for _, imp := range p.imports {
			if testHelper(imp) && !testHelper(p.path) {
				bad = append(bad, fmt.Sprintf("%s imports the test helper %s outside its tests", p.path, imp))
				continue
			}
			if testHelper(p.path) {
				continue
			}
			if !allowed(p.path, imp) {
				r := ruleOf(p.path)
				bad = append(bad, fmt.Sprintf("%s imports %s: the packages under %s may import only %s", p.path, imp, r.prefix, describe(r)))
			}
		}
	}
	return bad
}

// testHelper reports whether a package is a test helper: its last path
// element ends in "test".
func testHelper(path string) bool {
	return strings.HasSuffix(path[strings.LastIndex(path, "/")+1:], "test")
}

// ruleOf returns the rule of the longest prefix that holds path.
func ruleOf(path string) rule {
	best := rule{prefix: "", may: []string{""}}
	for _, r := range rules {
		if under(path, r.prefix) && len(r.prefix) > len(best.prefix) {
			best = r
		}
	}
	return best
}

// allowed reports whether the package at path may import imp.
func allowed(path, imp string) bool {
	r := ruleOf(path)
	// Its own layer, but not a sub-layer with a rule of its own above it
	// (internal may not import internal/dev or pkg/app).
	if under(imp, r.prefix) && ruleOf(imp).prefix == r.prefix {
		return true
	}
	for _, m := range r.may {
		if !under(imp, m) {
			continue
		}
		// A layer carved out below m (internal/dev in internal, pkg/app
		// in pkg) counts only when it is not above the importer.
		if in := ruleOf(imp).prefix; len(in) <= len(m) || !above(ruleOf(imp), r) {
			return true
		}
	}
	return false
}

// above reports whether rule a comes before (is a higher layer than) b.
func above(a, b rule) bool {
	for _, r := range rules {
		switch r.prefix {
		case a.prefix:
			return true
		case b.prefix:
			return false
		}
	}
	return false
}

// under reports whether path is prefix or below it ("" holds everything).
func under(path, prefix string) bool {
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

func describe(r rule) string {
	if len(r.may) == 0 {
		return "its own packages"
	}
	return "its own packages and " + strings.Join(r.may, ", ")
}
