package clitest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
	"github.com/stratus-ccm/stratus/minicloud/openstack"
)

// openstackCLI is Debian's openstack command; debPackages provide it and
// its load-balancer commands (hack/ci-packages.txt lists them for CI).
const openstackCLI = "/usr/bin/openstack"

var debPackages = []string{"python3-openstackclient", "python3-octaviaclient"}

// cli runs the openstack command against one minicloud, on loopback only.
type cli struct {
	t       *testing.T
	env     []string
	dir     string
	escapes string
}

// newCLI checks that the Debian packages are installed and prepares the
// command's environment: credentials for mc's Keystone in OS_*, a private
// HOME and working directory (no clouds.yaml, no cache of another cloud),
// no proxies, and a guard (testdata/sitecustomize.py) that refuses and
// records every name lookup and connection off loopback.
func newCLI(t *testing.T, mc *minicloudtest.Cloud) *cli {
	t.Helper()
	if _, err := os.Stat(openstackCLI); err != nil {
		t.Fatalf("%s is missing (%v): install the Debian packages %s (apt-get install -y %s)",
			openstackCLI, err, strings.Join(debPackages, " and "), strings.Join(debPackages, " "))
	}
	if out, err := exec.Command("/usr/bin/python3", "-c", "import octaviaclient.osc.v2").CombinedOutput(); err != nil {
		t.Fatalf("the openstack command has no load-balancer commands (%v: %s): install the Debian package python3-octaviaclient", err, out)
	}
	guard, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	c := &cli{t: t, dir: dir, escapes: filepath.Join(dir, "escapes")}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "OS_"), strings.HasSuffix(strings.ToLower(k), "_proxy"), k == "HOME", k == "PYTHONPATH", k == "XDG_CONFIG_HOME", k == "XDG_CACHE_HOME":
			continue
		}
		c.env = append(c.env, kv)
	}
	c.env = append(c.env,
		"HOME="+dir, "XDG_CONFIG_HOME="+filepath.Join(dir, ".config"), "XDG_CACHE_HOME="+filepath.Join(dir, ".cache"),
		"PYTHONPATH="+guard, "CLITEST_ESCAPES="+c.escapes, "no_proxy=*", "NO_PROXY=*",
		// The variables stratus dev's env file exports, no more: the
		// command's defaults (password auth, identity v3, the public
		// interface) do the rest, as for a user of that file.
		"OS_AUTH_URL="+mc.IdentityURL, "OS_USERNAME=operator", "OS_PASSWORD="+mc.Token,
		"OS_USER_DOMAIN_NAME="+openstack.DomainName, "OS_PROJECT_NAME="+openstack.ProjectName,
		"OS_PROJECT_DOMAIN_NAME="+openstack.DomainName, "OS_REGION_NAME="+minicloud.Region,
	)
	t.Cleanup(c.checkEscapes)
	return c
}

// checkEscapes fails the test if the command tried to leave loopback.
func (c *cli) checkEscapes() {
	b, err := os.ReadFile(c.escapes)
	if err == nil && len(b) > 0 {
		c.t.Errorf("the openstack command tried to leave loopback:\n%s", b)
	}
}

// run runs openstack with args and returns its standard output, or an
// error carrying its standard error.
func (c *cli) run(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, openstackCLI, args...)
	cmd.Env, cmd.Dir = c.env, c.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &cliError{args: args, err: err, stderr: stderr.String()}
	}
	return stdout.String(), nil
}

type cliError struct {
	args   []string
	err    error
	stderr string
}

func (e *cliError) Error() string {
	return "openstack " + strings.Join(e.args, " ") + ": " + e.err.Error() + ": " + strings.TrimSpace(e.stderr)
}

// ok runs a command that must succeed and returns its output.
func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// json runs a command that must succeed with -f json and decodes it.
func (c *cli) json(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "-f", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		c.t.Fatalf("openstack %s: output is not JSON (%v):\n%s", strings.Join(args, " "), err, out)
	}
}

// fails runs a command that must fail and returns its standard error.
func (c *cli) fails(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	ce, ok := err.(*cliError)
	if !ok {
		c.t.Fatalf("openstack %s succeeded, want a failure:\n%s", strings.Join(args, " "), out)
	}
	return ce.stderr
}

type row = map[string]any

func names(rows []row, key string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, str(r[key]))
	}
	return out
}

func str(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// startCloud starts minicloud with the dialect, pages of at most three
// items (as many as there are flavors; longer lists come in pages the
// client follows) and instances web-1, web-2 (each running a TCP backend on
// the same port, as a NodePort), db-1 and db-2.
func startCloud(t *testing.T) (*minicloudtest.Cloud, []*api.Instance, int) {
	t.Helper()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 10 * time.Millisecond, OpenStack: &openstack.Options{MaxPageSize: 3}})
	var insts []*api.Instance
	port := 0
	for _, n := range []string{"web-1", "web-2", "db-1", "db-2"} {
		inst, err := mc.Client.CreateInstance(context.Background(), api.InstanceCreate{Name: n, Type: "mc.small", Zone: minicloud.Zones[0]})
		if err != nil {
			t.Fatal(err)
		}
		insts = append(insts, inst)
		if strings.HasPrefix(n, "web-") {
			port = minicloudtest.StartBackend(t, n, inst.PrivateIP, minicloudtest.BackendOptions{TCP: true, Port: port}).Port
		}
	}
	return mc, insts, port
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the openstack command (about a second per call); skipped under -short")
	}
	t.Parallel()
}

// TestGuard: the Python the openstack command runs on, in the command's
// environment, refuses and records a name lookup and a connection off
// loopback, so the other tests' check that nothing left the machine can
// fail.
func TestGuard(t *testing.T) {
	skipShort(t)
	mc := minicloudtest.Start(t, minicloudtest.Options{OpenStack: &openstack.Options{}})
	c := newCLI(t, mc)
	for _, code := range []string{
		"import socket; socket.getaddrinfo('cloud.example.com', 443)",
		"import socket; socket.create_connection(('192.0.2.1', 5000), timeout=1)",
	} {
		cmd := exec.Command("/usr/bin/python3", "-c", code)
		cmd.Env, cmd.Dir = c.env, c.dir
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "refused to leave loopback") {
			t.Errorf("%s: %v, %s; want it refused by the guard", code, err, out)
		}
	}
	b, err := os.ReadFile(c.escapes)
	if err != nil || !strings.Contains(string(b), "lookup cloud.example.com") || !strings.Contains(string(b), "connect ('192.0.2.1', 5000)") {
		t.Errorf("recorded escapes %q, %v", b, err)
	}
	// What this test provoked is not the command's doing.
	if err := os.Remove(c.escapes); err != nil {
		t.Fatal(err)
	}
	// Loopback works through the guard.
	cmd := exec.Command("/usr/bin/python3", "-c", "import urllib.request, sys; urllib.request.urlopen(sys.argv[1]).read()", mc.URL+openstack.IdentityPrefix+"/v3")
	cmd.Env, cmd.Dir = c.env, c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("a request to the dialect on loopback: %v, %s", err, out)
	}
}

func mustAddr(t *testing.T, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatalf("%q is not an address: %v", s, err)
	}
	return a
}
