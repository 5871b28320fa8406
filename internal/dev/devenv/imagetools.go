package devenv

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// The upstream e2e tests run shell commands inside agnhost pods (sh -c
// "curl ...", wget, "echo hostName | nc -v -t -w 2 ..."): the upstream
// agnhost image is Alpine with those tools. The real nodes' agnhost image
// gets them from Debian packages of this machine instead: dash as sh,
// curl, wget and netcat-openbsd (whose nc has the -v, -t and -u the tests
// pass, which busybox's lacks) with the shared libraries they load, each
// at its path on this machine, and busybox-static for the other applets.
// (Debian's busybox-static is no sh here: its shell runs its own applets
// before PATH, so nc would be busybox's; and its wget, statically linked
// with glibc, crashes on a name lookup in an image without glibc's NSS
// modules.)

// wgetrc makes GNU wget try once, as the upstream image's busybox wget
// does: the tests run "wget -T 5" where a load balancer must drop the
// traffic and expect it to fail within their own deadline, which GNU
// wget's 20 tries on a timeout (minutes) would outlast.
const wgetrc = "tries = 1\n"

// imageTool is a program an image needs, and the Debian package that
// installs it on this machine.
type imageTool struct{ path, pkg string }

var (
	// busyboxTool is the static busybox; its applets become links to it.
	busyboxTool = imageTool{"/bin/busybox", "busybox-static"}
	// agnhostTools are the dynamically linked tools of the agnhost image,
	// each put at its path in the image (nc as /usr/bin/nc, before
	// busybox's /bin in PATH).
	agnhostTools = []struct {
		imageTool
		as string
	}{
		{imageTool{"/bin/dash", "dash"}, "/bin/sh"},
		{imageTool{"/usr/bin/curl", "curl"}, "/usr/bin/curl"},
		{imageTool{"/usr/bin/wget", "wget"}, "/usr/bin/wget"},
		{imageTool{"/bin/nc.openbsd", "netcat-openbsd"}, "/usr/bin/nc"},
	}
)

// libDirs are where the dynamic loader of this machine (Debian, multiarch)
// finds libraries without a cache; the image keeps each library at the
// path it has here, and its LD_LIBRARY_PATH lists the same folders.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// agnhostImageTools returns the files, links and environment that add the
// tools to the agnhost image, or an error naming the Debian package to
// install when one is missing.
func agnhostImageTools() ([]imageFile, []imageLink, []string, error) {
	if err := busyboxTool.check(); err != nil {
		return nil, nil, nil, err
	}
	files := []imageFile{{src: busyboxTool.path, path: "/bin/busybox"}}
	seen := map[string]bool{"/bin/busybox": true}
	for _, t := range agnhostTools {
		if err := t.check(); err != nil {
			return nil, nil, nil, err
		}
		files = append(files, imageFile{src: t.path, path: t.as})
		seen[t.as] = true
		libs, err := sharedLibraries(t.path)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, l := range libs {
			if !seen[l.path] {
				seen[l.path] = true
				files = append(files, l)
			}
		}
	}
	applets, err := busyboxApplets(busyboxTool.path)
	if err != nil {
		return nil, nil, nil, err
	}
	// An applet a tool replaces is left out, so that no PATH order decides.
	for _, t := range agnhostTools {
		seen["/bin/"+filepath.Base(t.as)] = true
	}
	var links []imageLink
	for _, a := range applets {
		if p := "/bin/" + a; !seen[p] {
			links = append(links, imageLink{path: p, target: "/bin/busybox"})
		}
	}
	files = append(files, imageFile{path: "/etc/wgetrc", data: []byte(wgetrc)})
	env := []string{"LD_LIBRARY_PATH=" + strings.Join(libDirs, ":")}
	return files, links, env, nil
}

// check returns an error naming the Debian package to install when the
// tool is missing.
func (t imageTool) check() error {
	if _, err := os.Stat(t.path); err != nil {
		return fmt.Errorf("the agnhost image of the real nodes needs %s: install the Debian package %s (hack/ci-packages.txt)", t.path, t.pkg)
	}
	return nil
}

// busyboxApplets lists the applets of a busybox binary.
func busyboxApplets(bin string) ([]string, error) {
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", bin, err)
	}
	var applets []string
	for _, a := range strings.Fields(string(out)) {
		// An applet becomes /bin/<name>; busybox itself is there.
		if a != "busybox" && !strings.Contains(a, "/") {
			applets = append(applets, a)
		}
	}
	return applets, nil
}

// sharedLibraries returns the dynamic loader and every shared library a
// binary loads, transitively, each as its file on this machine at the
// path the loader looks for it.
func sharedLibraries(bin string) ([]imageFile, error) {
	var out []imageFile
	seen := map[string]bool{}
	queue := []string{bin}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		f, err := elf.Open(cur)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cur, err)
		}
		needed, err := f.ImportedLibraries()
		var interp string
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				b := make([]byte, p.Filesz)
				if _, err := p.ReadAt(b, 0); err == nil {
					interp = strings.TrimRight(string(b), "\x00")
				}
			}
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", cur, err)
		}
		if interp != "" && !seen[interp] {
			seen[interp] = true
			src, err := filepath.EvalSymlinks(interp)
			if err != nil {
				return nil, fmt.Errorf("%s: its loader %s: %w", cur, interp, err)
			}
			out = append(out, imageFile{src: src, path: interp})
		}
		for _, name := range needed {
			if seen[name] {
				continue
			}
			seen[name] = true
			path := findLibrary(name)
			if path == "" {
				return nil, fmt.Errorf("%s needs %s, found in none of %s", cur, name, strings.Join(libDirs, ", "))
			}
			src, err := filepath.EvalSymlinks(path)
			if err != nil {
				return nil, err
			}
			out = append(out, imageFile{src: src, path: path})
			queue = append(queue, src)
		}
	}
	slices.SortFunc(out, func(a, b imageFile) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// findLibrary returns the path of a library in the first of libDirs that
// has it, or "".
func findLibrary(name string) string {
	for _, d := range libDirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
