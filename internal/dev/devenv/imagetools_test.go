package devenv

import (
	"archive/tar"
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestAgnhostImageTools unpacks the agnhost image's layer and runs, inside
// it (chroot), the commands the upstream e2e tests run in agnhost pods.
func TestAgnhostImageTools(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the image's tools in a chroot; skipped under -short")
	}
	if os.Geteuid() != 0 {
		t.Fatal("chroot needs root; only -short skips this test")
	}
	files, links, env, err := agnhostImageTools()
	if err != nil {
		t.Fatal(err)
	}
	// Any static binary stands for agnhost here.
	spec := imageSpec{bin: busyboxTool.path, path: "/agnhost", files: files, links: links, env: env}
	layer, err := imageLayer(spec)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	unpack(t, layer, root)
	// A port where a listener will accept a connection and never answer.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	for _, cmd := range []string{
		"curl --version",
		"echo hostName | nc -v -t -w 2 127.0.0.1 1; true",
		"nc -h 2>&1 | grep -q -- -u",
		// With /proc, as in a container, a busybox sh would run its own
		// nc applet here.
		"mkdir -p /proc && mount -t proc proc /proc && nc -h 2>&1 | grep -q -- -u",
		"wget --help 2>&1 | grep -q -i usage",
		// The source-ranges test's command; 4 is wget's network failure.
		`wget -T 5 -qO- "127.0.0.1:1"; test $? -eq 4`,
		// wget tries once, as busybox's does: a read that times out gives
		// up rather than trying again (a second try would find the
		// one-connection listener gone and be refused).
		"mkdir -p /dev; test -e /dev/null || mknod -m 666 /dev/null c 1 3; nc -d -l 127.0.0.1 " + silent + " & for i in 1 2 3 4 5 6 7 8 9 10; do wget -T 1 -O- http://127.0.0.1:" + silent + "/ 2>&1 | grep -q 'Giving up' && exit 0; sleep 0.2; done; exit 1",
		"test \"$(command -v nc)\" = /usr/bin/nc && test \"$(command -v wget)\" = /usr/bin/wget",
		"test -x /agnhost",
	} {
		c := exec.Command("/bin/sh", "-c", cmd)
		c.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin"}, env...)
		// A mount namespace of its own (private): /proc mounted below is
		// gone with the command.
		c.SysProcAttr = &syscall.SysProcAttr{Chroot: root, Unshareflags: syscall.CLONE_NEWNS}
		c.Dir = "/"
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("sh -c %q in the image: %v\n%s", cmd, err, out)
		}
	}
}

// unpack writes a layer's files, folders and links under root.
func unpack(t *testing.T, layer []byte, root string) {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, strings.TrimSuffix(h.Name, "/"))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(h.Linkname, p)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, data, os.FileMode(h.Mode))
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
