package scaffold_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/internal/dev/cli/providercmd"
	"github.com/stratus-ccm/stratus/internal/dev/repo"
	"github.com/stratus-ccm/stratus/internal/dev/scaffold"
	"github.com/stratus-ccm/stratus/internal/dev/testenv"
	"github.com/stratus-ccm/stratus/pkg/conformance"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestCheckName(t *testing.T) {
	for _, name := range []string{"mycloud", "my-cloud", "c", "cloud9", "a-b-c"} {
		if err := scaffold.CheckName(name); err != nil {
			t.Errorf("CheckName(%q): %v; want nil", name, err)
		}
	}
	for _, name := range []string{"", "MyCloud", "my_cloud", "9cloud", "-cloud", "cloud-", "my--cloud", "my.cloud", "my cloud", "plugin", strings.Repeat("a", 33)} {
		err := scaffold.CheckName(name)
		if err == nil || !strings.HasPrefix(err.Error(), "NAME: ") {
			t.Errorf("CheckName(%q): %v; want an error naming NAME", name, err)
		}
	}
}

// initCommand runs `stratus provider init` with args and returns its output
// and error.
func initCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := providercmd.NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"init"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestInitCommandRejects(t *testing.T) {
	nonEmpty := t.TempDir()
	if err := os.WriteFile(filepath.Join(nonEmpty, "notes.txt"), []byte("mine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // the start of the error
	}{
		{"upper case", []string{"MyCloud", "--dir", filepath.Join(t.TempDir(), "x")}, "NAME: "},
		{"underscore", []string{"my_cloud", "--dir", filepath.Join(t.TempDir(), "x")}, "NAME: "},
		{"reserved", []string{"plugin", "--dir", filepath.Join(t.TempDir(), "x")}, "NAME: "},
		{"no name", nil, "NAME: "},
		{"two names", []string{"a", "b"}, "NAME: "},
		{"non-empty dir", []string{"mycloud", "--dir", nonEmpty}, "--dir: "},
		{"dir is a file", []string{"mycloud", "--dir", file}, "--dir: "},
		{"bad module", []string{"mycloud", "--dir", filepath.Join(t.TempDir(), "x"), "--module", "example.com/my cloud"}, "--module: "},
		{"not a checkout", []string{"mycloud", "--dir", filepath.Join(t.TempDir(), "x"), "--stratus", t.TempDir()}, "--stratus: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := initCommand(t, tc.args...)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("stratus provider init %s: %v; want an error starting %q", strings.Join(tc.args, " "), err, tc.want)
			}
			if out != "" {
				t.Errorf("output on error: %q; want none (the error says it all)", out)
			}
		})
	}
	entries, _ := os.ReadDir(nonEmpty)
	if len(entries) != 1 {
		t.Errorf("the non-empty directory holds %d entries afterwards; want its 1", len(entries))
	}
}

func TestInitWritesTheModule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mycloud")
	out, err := initCommand(t, "my-cloud", "--dir", dir, "--module", "github.com/me/mycloud")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"cmd/my-cloud-ccm/main.go", "cmd/my-cloud-plugin/main.go", "provider/cloud.go", "conformance/driver.go", "conformance/conformance_test.go", "Makefile", "README.md", "go.mod", "go.sum"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
		if !strings.Contains(out, "  "+f+"\n") {
			t.Errorf("the output does not list %s:\n%s", f, out)
		}
	}
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	for _, want := range []string{"module github.com/me/mycloud\n", "\tgithub.com/stratus-ccm/stratus v0.0.0\n", "replace github.com/stratus-ccm/stratus => " + root + "\n"} {
		if !bytes.Contains(gomod, []byte(want)) {
			t.Errorf("go.mod lacks %q:\n%s", want, gomod)
		}
	}
	cloud, _ := os.ReadFile(filepath.Join(dir, "provider/cloud.go"))
	if !bytes.Contains(cloud, []byte(`const Name = "my-cloud"`)) {
		t.Errorf("provider/cloud.go does not register my-cloud:\n%s", cloud)
	}
	if _, err := initCommand(t, "my-cloud", "--dir", dir); err == nil || !strings.HasPrefix(err.Error(), "--dir: ") {
		t.Errorf("a second init into %s: %v; want an error naming --dir", dir, err)
	}
}

func TestInitInsideTheCheckoutReplacesRelatively(t *testing.T) {
	stratus := t.TempDir()
	src, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stratus, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(stratus, "providers-wip", "mycloud")
	if _, err := scaffold.Init(scaffold.Options{Name: "mycloud", Dir: dir, Stratus: stratus}); err != nil {
		t.Fatal(err)
	}
	gomod, _ := os.ReadFile(filepath.Join(dir, "go.mod"))
	if want := "replace github.com/stratus-ccm/stratus => ../..\n"; !bytes.Contains(gomod, []byte(want)) {
		t.Errorf("go.mod lacks %q:\n%s", want, gomod)
	}
}

// goCmd is a go command in the scaffolded module: from the module cache
// only (GOPROXY=off), with the Go in use.
func goCmd(ctx context.Context, dir string, env []string, args ...string) *exec.Cmd {
	c := exec.CommandContext(ctx, "go", args...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false")
	c.Env = append(c.Env, env...)
	c.WaitDelay = 10 * time.Second
	return c
}

// run runs c and returns its combined output, failing the test when it
// fails.
func run(t *testing.T, c *exec.Cmd) string {
	t.Helper()
	start := time.Now()
	out, err := c.CombinedOutput()
	t.Logf("%s (%s): %s", strings.Join(c.Args, " "), time.Since(start).Round(time.Second), exitStatus(err))
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(c.Args, " "), err, out)
	}
	return string(out)
}

func exitStatus(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// TestScaffoldedModule scaffolds a provider against this checkout, builds
// its binaries, runs them, and runs its conformance test against a real
// control plane: every capability is switched off, so every scenario must
// be skipped, each with the reason, and nothing may fail or panic.
func TestScaffoldedModule(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the scaffolded module's binaries (minutes) and runs a control plane")
	}
	// The builds take minutes, more on a busy machine: the commands get
	// until shortly before the test binary's own deadline.
	deadline := time.Now().Add(30 * time.Minute)
	if d, ok := t.Deadline(); ok {
		deadline = d.Add(-30 * time.Second)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	root, err := repo.Root()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "mycloud")
	if _, err := scaffold.Init(scaffold.Options{Name: "mycloud", Dir: dir, Stratus: root}); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(t.TempDir(), "bin")
	run(t, goCmd(ctx, dir, nil, "build", "-ldflags", "-X main.version=v0.0.1-scaffold", "-o", bin+"/", "./..."))
	run(t, goCmd(ctx, dir, nil, "vet", "-tags", "conformance", "./..."))
	run(t, goCmd(ctx, dir, nil, "test", "-count=1", "./provider/"))

	ccm := filepath.Join(bin, "mycloud-ccm")
	if out := run(t, exec.CommandContext(ctx, ccm, "--version")); strings.TrimSpace(out) != "stratus-ccm v0.0.1-scaffold" {
		t.Errorf("mycloud-ccm --version: %q; want stratus-ccm v0.0.1-scaffold", out)
	}
	help := run(t, exec.CommandContext(ctx, ccm, "--help"))
	for _, flag := range []string{"--cloud-provider string", "--cloud-config string", "--kubeconfig string", "--leader-elect"} {
		if !strings.Contains(help, flag) {
			t.Errorf("mycloud-ccm --help lacks %s:\n%s", flag, help)
		}
	}
	if out := run(t, exec.CommandContext(ctx, ccm, "plugin", "serve", "--help")); !strings.Contains(out, "--provider string") {
		t.Errorf("mycloud-ccm plugin serve --help lacks --provider:\n%s", out)
	}
	pluginHelp := run(t, exec.CommandContext(ctx, filepath.Join(bin, "mycloud-plugin"), "-h"))
	for _, flag := range []string{"-socket", "-listen", "-cloud-config", "-kubeconfig", "-tls-client-ca-file", "Serves the mycloud provider"} {
		if !strings.Contains(pluginHelp, flag) {
			t.Errorf("mycloud-plugin -h lacks %s:\n%s", flag, pluginHelp)
		}
	}
	// Every capability is off: serving the provider is refused, saying so.
	serve := exec.CommandContext(ctx, filepath.Join(bin, "mycloud-plugin"), "-cloud-config", filepath.Join(dir, "conformance/testdata/cloud-config.yaml"), "-socket", filepath.Join(t.TempDir(), "p.sock"))
	if out, err := serve.CombinedOutput(); err == nil || !strings.Contains(string(out), "supports none of InstancesV2") {
		t.Errorf("mycloud-plugin serving a provider without capabilities: %v\n%s\nwant it refused, naming the capabilities", err, out)
	}

	env := testenv.Get(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := conformance.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	// -o keeps the test binary, for the run without KUBECONFIG below (go
	// test links a test binary anew on every run).
	confTest := filepath.Join(t.TempDir(), "conformance.test")
	out := run(t, goCmd(ctx, dir, []string{"KUBECONFIG=" + kubeconfig}, "test", "-tags", "conformance", "-count=1", "-v", "-o", confTest, "./conformance/"))
	t.Logf("the conformance test's output:\n%s", out)
	for _, want := range []string{
		"--- PASS: TestConformance",
		"SKIP instances/provider-id the provider supports neither InstancesV2 nor Instances + Zones",
		"SKIP loadbalancers/create the provider does not support LoadBalancer",
		"SKIP routes/create the provider does not support Routes",
		"SKIP e2e/node-initialized the provider supports neither InstancesV2 nor Instances + Zones",
		fmt.Sprintf("mycloud: 0 passed, 0 failed, %d skipped", len(conformance.Scenarios())),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the conformance test's output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "panic") {
		t.Errorf("the conformance test's output mentions a panic:\n%s", out)
	}

	// Without KUBECONFIG the conformance test fails and says why.
	noKube := exec.CommandContext(ctx, confTest, "-test.v")
	noKube.Dir = filepath.Join(dir, "conformance")
	noKube.Env = append(os.Environ(), "KUBECONFIG=")
	if out, err := noKube.CombinedOutput(); err == nil || !strings.Contains(string(out), "KUBECONFIG is not set") {
		t.Errorf("the conformance test without KUBECONFIG: %v\n%s\nwant a failure saying KUBECONFIG is not set", err, out)
	}
}
