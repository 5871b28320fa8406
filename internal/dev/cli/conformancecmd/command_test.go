package conformancecmd

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/stratus-ccm/stratus/internal/dev/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// kubeconfig writes the test control plane's admin kubeconfig.
func kubeconfig(t *testing.T) string {
	t.Helper()
	cfg := testenv.Get(t).Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["t"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["t"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["t"] = &clientcmdapi.Context{Cluster: "t", AuthInfo: "t"}
	kc.CurrentContext = "t"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func execute(args ...string) (string, error) {
	cmd := NewCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

type junit struct {
	Suites []struct {
		Name     string `xml:"name,attr"`
		Failures int    `xml:"failures,attr"`
		Cases    []struct {
			Name    string    `xml:"name,attr"`
			Failure *struct{} `xml:"failure"`
			Skipped *struct{} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func readJUnit(t *testing.T, path string) junit {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j junit
	if err := xml.Unmarshal(data, &j); err != nil {
		t.Fatalf("JUnit XML: %v\n%s", err, data)
	}
	return j
}

// A focused run passes, prints the table, writes JUnit XML with only the
// focused and unskipped scenarios run, and rewrites the matrix.
func TestFocusedRunPasses(t *testing.T) {
	dir := t.TempDir()
	junitPath, matrixPath := filepath.Join(dir, "out.xml"), filepath.Join(dir, "m.md")
	if err := os.WriteFile(matrixPath, []byte("# x\n"+MatrixBegin+"\nold\n"+MatrixEnd+"\ntail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execute("--driver=minicloud", "--kubeconfig="+kubeconfig(t),
		"--focus=^(instances/provider-id|loadbalancers/create|routes/create)$", "--skip=^routes/",
		"--junit="+junitPath, "--matrix="+matrixPath)
	if err != nil {
		t.Fatalf("conformance: %v\n%s", err, out)
	}
	for _, want := range []string{"PASS    instances/provider-id", "PASS    loadbalancers/create", "SKIP    routes/create", "matches --skip", "minicloud: 2 passed, 0 failed, 1 skipped"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	j := readJUnit(t, junitPath)
	var names []string
	for _, s := range j.Suites {
		for _, c := range s.Cases {
			if c.Failure != nil {
				t.Errorf("JUnit: %s failed", c.Name)
			}
			names = append(names, c.Name)
		}
	}
	if got := strings.Join(names, ","); got != "instances/provider-id,loadbalancers/create,routes/create" {
		t.Errorf("JUnit test cases %s", got)
	}
	m, _ := os.ReadFile(matrixPath)
	if !strings.Contains(string(m), "| instances | 1/1 pass |") || strings.Contains(string(m), "old") || !strings.HasSuffix(string(m), MatrixEnd+"\ntail\n") {
		t.Errorf("matrix file:\n%s", m)
	}
}

// The minicloud-plugin driver runs the provider through the plugin
// protocol, named as such in the table, the JUnit suites and the matrix.
func TestPluginDriver(t *testing.T) {
	dir := t.TempDir()
	junitPath, matrixPath := filepath.Join(dir, "out.xml"), filepath.Join(dir, "m.md")
	if err := os.WriteFile(matrixPath, []byte(MatrixBegin+"\n"+MatrixEnd+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := execute("--driver=minicloud-plugin", "--kubeconfig="+kubeconfig(t), "--focus=^instances/provider-id$",
		"--junit="+junitPath, "--matrix="+matrixPath)
	if err != nil {
		t.Fatalf("conformance: %v\n%s", err, out)
	}
	if !strings.Contains(out, "PASS    instances/provider-id") || !strings.Contains(out, "minicloud (plugin): 1 passed, 0 failed, 0 skipped") {
		t.Errorf("table:\n%s", out)
	}
	if j := readJUnit(t, junitPath); len(j.Suites) != 1 || j.Suites[0].Name != "minicloud (plugin)/instances" {
		t.Errorf("JUnit suites %+v", j.Suites)
	}
	if m, _ := os.ReadFile(matrixPath); !strings.Contains(string(m), "| Scenario group | minicloud (plugin) |") {
		t.Errorf("matrix file:\n%s", m)
	}
}

// A failing scenario makes the command fail with ErrFailed (exit status
// 1) and is a JUnit failure naming what was expected.
func TestFailureFailsTheCommand(t *testing.T) {
	junitPath := filepath.Join(t.TempDir(), "out.xml")
	// minicloud's tags hold 256 bytes: the provider rejects a longer
	// cluster name, so creating a load balancer fails.
	out, err := execute("--driver=minicloud", "--kubeconfig="+kubeconfig(t), "--focus=^loadbalancers/create$",
		"--cluster-name="+strings.Repeat("c", 300), "--junit="+junitPath)
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("conformance: got %v, want ErrFailed\n%s", err, out)
	}
	if !strings.Contains(out, "FAIL    loadbalancers/create") || !strings.Contains(out, "expected a status, got error") {
		t.Errorf("table:\n%s", out)
	}
	j := readJUnit(t, junitPath)
	if len(j.Suites) != 1 || j.Suites[0].Failures != 1 || j.Suites[0].Name != "minicloud/loadbalancers" {
		t.Errorf("JUnit suites %+v", j.Suites)
	}
}

// Bad flags are errors naming the flag, before anything runs.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--focus=("}, "--focus"},
		{[]string{"--skip=["}, "--skip"},
		{[]string{"--driver=nope"}, `--driver "nope": want one of minicloud, minicloud-plugin, openstack, openstack-upstream, vcsim, vcsim-upstream`},
		{[]string{"--timeout=0s"}, "--timeout"},
		{[]string{"--cloud-config=x.yaml"}, "give exactly one --driver"},
		{[]string{"--driver=minicloud", "--cloud-config=/does/not/exist"}, "--cloud-config"},
	} {
		_, err := execute(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// --list prints every scenario with what it checks.
func TestList(t *testing.T) {
	out, err := execute("--list")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "instances/deleted-not-exists") || !strings.Contains(out, "InstanceExists becomes false") {
		t.Errorf("--list:\n%s", out)
	}
}
