// Package scaffold writes the Go module of a new cloud provider for
// stratus, as `stratus provider init NAME` does: a provider on
// k8s.io/cloud-provider and pkg/stratus with every capability stubbed and
// switched off, stratus-ccm with it compiled in (pkg/app), a plugin around
// pkg/plugin.Serve, a conformance driver and the test that runs the kit
// (pkg/conformance) with it, a Makefile and a README.
//
// The templates are in templates/, embedded; a path element NAME in a
// template's path is replaced by the provider's name. The module's go.mod
// replaces stratus's module with a local checkout (stratus is consumed from
// source) and starts with that checkout's requirements and go.sum, so that
// it builds with the module cache the checkout already needs.
package scaffold

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/stratus-ccm/stratus/pkg/plugin"
)

//go:embed templates
var templates embed.FS

// StratusModule is the module path of stratus.
const StratusModule = "github.com/stratus-ccm/stratus"

// Options says what Init writes. Errors name each option as `stratus
// provider init` spells it: NAME, --module, --dir, --stratus.
type Options struct {
	// Name is the provider's registered name (--cloud-provider=Name) and
	// the scheme of its provider IDs.
	Name string
	// Module is the new module's path; default example.com/Name.
	Module string
	// Dir is where the module is written; default ./Name. It must not
	// exist, or be an empty directory.
	Dir string
	// Stratus is the stratus checkout that the go.mod's replace directive
	// points at, and whose go.mod and go.sum the new ones start from
	// (required).
	Stratus string
}

// nameRE is a provider name: lower-case letters, digits and inner hyphens,
// starting with a letter; it is also a URL scheme (provider IDs) and part
// of the binaries' names.
var nameRE = regexp.MustCompile(`^[a-z]([a-z0-9-]*[a-z0-9])?$`)

// maxNameLen bounds a name, which also prefixes binaries and provider IDs.
const maxNameLen = 32

// CheckName returns an error naming the argument NAME unless name is a
// valid provider name.
func CheckName(name string) error {
	switch {
	case name == "":
		return errors.New("NAME: empty; want the provider's name, such as mycloud")
	case len(name) > maxNameLen:
		return fmt.Errorf("NAME: %q is %d characters; at most %d", name, len(name), maxNameLen)
	case !nameRE.MatchString(name) || strings.Contains(name, "--"):
		return fmt.Errorf("NAME: %q is not a valid provider name: use lower-case letters, digits and single inner hyphens, starting with a letter (it is --cloud-provider's value and the scheme of provider IDs)", name)
	case name == plugin.ProviderType:
		return fmt.Errorf("NAME: %q is taken: stratus registers the provider type of plugins under it", name)
	}
	return nil
}

// moduleRE is a plausible module path: dot-free first elements are allowed
// (a module that is never fetched), but no spaces, no empty elements and no
// leading or trailing slash.
var moduleRE = regexp.MustCompile(`^[A-Za-z0-9._~-]+(/[A-Za-z0-9._~-]+)*$`)

// withDefaults checks o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if err := CheckName(o.Name); err != nil {
		return o, err
	}
	if o.Module == "" {
		o.Module = "example.com/" + o.Name
	}
	if !moduleRE.MatchString(o.Module) || strings.HasPrefix(o.Module, StratusModule+"/") || o.Module == StratusModule {
		return o, fmt.Errorf("--module: %q is not a module path of its own, such as example.com/%s", o.Module, o.Name)
	}
	if o.Dir == "" {
		o.Dir = o.Name
	}
	if o.Stratus == "" {
		return o, errors.New("--stratus: empty; want the stratus checkout the module builds against")
	}
	abs, err := filepath.Abs(o.Stratus)
	if err != nil {
		return o, fmt.Errorf("--stratus: %w", err)
	}
	o.Stratus = abs
	data, err := os.ReadFile(filepath.Join(o.Stratus, "go.mod"))
	if err != nil || !strings.HasPrefix(string(data), "module "+StratusModule+"\n") {
		return o, fmt.Errorf("--stratus: %s is not a stratus checkout (no go.mod of %s)", o.Stratus, StratusModule)
	}
	return o, nil
}

// checkDir refuses a Dir that holds anything.
func checkDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("--dir: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("--dir: %s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("--dir: %s is not empty (it holds %s); the module is written only into a new or empty directory", dir, entries[0].Name())
	}
	return nil
}

// data is what the templates see.
type data struct {
	Name, Module string
	// Stratus is the replace directive's target as go.mod spells it.
	Stratus string
}

// Init writes the module o describes and returns the paths it wrote,
// relative to o.Dir, sorted. It writes nothing when o is invalid or o.Dir
// is not empty.
func Init(o Options) ([]string, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := checkDir(o.Dir); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, fmt.Errorf("--dir: %w", err)
	}
	d := data{Name: o.Name, Module: o.Module, Stratus: replaceTarget(dir, o.Stratus)}
	files, err := render(d)
	if err != nil {
		return nil, err
	}
	if files["go.mod"], err = goMod(d, o.Stratus); err != nil {
		return nil, err
	}
	if files["go.sum"], err = os.ReadFile(filepath.Join(o.Stratus, "go.sum")); err != nil {
		return nil, fmt.Errorf("--stratus: %w", err)
	}
	paths := slices.Sorted(maps.Keys(files))
	for _, p := range paths {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, files[p], 0o644); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

// replaceTarget is how go.mod names the checkout: relative when the module
// is inside it (it then moves with it), absolute otherwise.
func replaceTarget(dir, stratus string) string {
	if rel, err := filepath.Rel(stratus, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		back, err := filepath.Rel(dir, stratus)
		if err == nil {
			return filepath.ToSlash(back)
		}
	}
	return stratus
}

// render executes every template into the module's files, by path. Go
// files are gofmt'ed (which also catches a template that makes bad Go).
func render(d data) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := fs.WalkDir(templates, "templates", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		src, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		t, err := template.New(p).Option("missingkey=error").Parse(string(src))
		if err != nil {
			return fmt.Errorf("scaffold: template %s: %w", p, err)
		}
		var out bytes.Buffer
		if err := t.Execute(&out, d); err != nil {
			return fmt.Errorf("scaffold: template %s: %w", p, err)
		}
		rel := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".tmpl")
		elems := strings.Split(rel, "/")
		for i, e := range elems {
			elems[i] = strings.ReplaceAll(e, "NAME", d.Name)
		}
		rel = path.Join(elems...)
		b := out.Bytes()
		if strings.HasSuffix(rel, ".go") {
			if b, err = format.Source(b); err != nil {
				return fmt.Errorf("scaffold: template %s makes invalid Go: %w", p, err)
			}
		}
		files[rel] = b
		return nil
	})
	return files, err
}

// directDeps are the modules the templates import.
var directDeps = []string{
	"k8s.io/api",
	"k8s.io/client-go",
	"k8s.io/cloud-provider",
	"k8s.io/controller-manager",
	"sigs.k8s.io/yaml",
}

// goMod writes the module's go.mod: stratus (replaced by the checkout) and
// the checkout's requirements at its versions, the modules the templates
// import as direct ones, the others indirect.
func goMod(d data, stratus string) ([]byte, error) {
	src, err := os.ReadFile(filepath.Join(stratus, "go.mod"))
	if err != nil {
		return nil, fmt.Errorf("--stratus: %w", err)
	}
	goLine, reqs, err := parseGoMod(src)
	if err != nil {
		return nil, fmt.Errorf("--stratus: %s: %w", filepath.Join(stratus, "go.mod"), err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "module %s\n\n%s\n\n", d.Module, goLine)
	fmt.Fprintf(&b, "require (\n\t%s v0.0.0\n", StratusModule)
	var indirect []string
	for _, r := range reqs {
		mod, _, _ := strings.Cut(r, " ")
		if slices.Contains(directDeps, mod) {
			fmt.Fprintf(&b, "\t%s\n", r)
		} else {
			indirect = append(indirect, r)
		}
	}
	b.WriteString(")\n")
	if len(indirect) > 0 {
		b.WriteString("\nrequire (\n")
		for _, r := range indirect {
			fmt.Fprintf(&b, "\t%s // indirect\n", r)
		}
		b.WriteString(")\n")
	}
	fmt.Fprintf(&b, "\n// stratus is built from source: this is the checkout the module was\n// made from. Point it at yours.\nreplace %s => %s\n", StratusModule, d.Stratus)
	return b.Bytes(), nil
}

// parseGoMod returns the go directive of a go.mod and its requirements as
// "path version", in order. It reads the go.mod stratus writes (go mod
// tidy's layout); a replace directive in it is an error, since the new
// module would have to repeat it.
func parseGoMod(src []byte) (goLine string, reqs []string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(src))
	inRequire := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		f := strings.Fields(line)
		switch {
		case len(f) == 0:
		case inRequire && f[0] == ")":
			inRequire = false
		case inRequire && len(f) == 2:
			reqs = append(reqs, f[0]+" "+f[1])
		case inRequire:
			return "", nil, fmt.Errorf("unexpected line in a require block: %q", line)
		case f[0] == "go" && len(f) == 2:
			goLine = line
		case f[0] == "require" && len(f) == 2 && f[1] == "(":
			inRequire = true
		case f[0] == "require" && len(f) == 3:
			reqs = append(reqs, f[1]+" "+f[2])
		case f[0] == "replace" || f[0] == "exclude":
			return "", nil, fmt.Errorf("it has a %s directive, which a module built on it would have to repeat", f[0])
		}
	}
	if goLine == "" {
		return "", nil, errors.New("no go directive")
	}
	return goLine, reqs, sc.Err()
}
