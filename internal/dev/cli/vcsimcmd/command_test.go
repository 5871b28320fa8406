package vcsimcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/vcsim"
)

// serve runs `vcsim args...` until the test ends and returns its banner.
func serve(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	cmd := NewCommand()
	cmd.SetOut(pw)
	cmd.SetErr(pw)
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() {
		done <- cmd.ExecuteContext(ctx)
		pw.Close()
	}()
	var banner strings.Builder
	sc := bufio.NewScanner(pr)
	ready := false
	for sc.Scan() {
		banner.WriteString(sc.Text() + "\n")
		if sc.Text() == ReadyLine {
			ready = true
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if !ready {
		cancel()
		t.Fatalf("vcsim did not get ready: %v\n%s", <-done, banner.String())
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("vcsim after Ctrl-C: %v", err)
		}
	})
	return banner.String()
}

// run executes a client command of `vcsim` and returns its output.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	cmd.SilenceUsage = true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("vcsim %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// soapClient logs in to the served vCenter the way a provider would, from
// the files the command wrote.
func soapClient(t *testing.T, st vcsim.State) *vim25.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := soap.ParseURL(st.Server + "/sdk")
	if err != nil {
		t.Fatal(err)
	}
	sc := soap.NewClient(u, false)
	if err := sc.SetRootCAs(st.CAFile); err != nil {
		t.Fatal(err)
	}
	c, err := vim25.NewClient(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := session.NewManager(c).Login(ctx, url.UserPassword(st.Username, st.Password)); err != nil {
		t.Fatal(err)
	}
	return c
}

func vm(t *testing.T, c *vim25.Client, name string) *mo.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = v.Destroy(ctx) }()
	var vms []mo.VirtualMachine
	if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"name", "runtime.powerState", "guest.hostName", "guest.ipAddress"}, &vms); err != nil {
		t.Fatal(err)
	}
	for i := range vms {
		if vms[i].Name == name {
			return &vms[i]
		}
	}
	return nil
}

func TestServeAndDrive(t *testing.T) {
	dir := t.TempDir()
	banner := serve(t, "--listen", "127.0.0.1:0", "--vms", "2", "--state-dir", dir, "--username", "admin", "--password", "s3cret")

	st, err := vcsim.ReadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Username != "admin" || st.Password != "s3cret" || st.CAFile != filepath.Join(dir, caFileName) || len(st.Thumbprint) != 59 {
		t.Errorf("server.json: %+v", st)
	}
	for _, want := range []string{st.Server + "/sdk", "username:   admin", "password:   s3cret", "thumbprint: " + st.Thumbprint, "CA file:    " + st.CAFile, "caFile: " + st.CAFile, "zone: k8s-zone"} {
		if !strings.Contains(banner, want) {
			t.Errorf("banner lacks %q:\n%s", want, banner)
		}
	}
	var cfg struct {
		Global map[string]any    `json:"global"`
		Labels map[string]string `json:"labels"`
	}
	rawCfg, err := os.ReadFile(filepath.Join(dir, configFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rawCfg, &cfg); err != nil || cfg.Global["user"] != "admin" || cfg.Global["caFile"] != st.CAFile || cfg.Labels["region"] != "k8s-region" {
		t.Errorf("cloud-config.yaml: %+v, %v\n%s", cfg, err, rawCfg)
	}

	c := soapClient(t, st)
	sd := "--state-dir=" + dir
	if out := mustRun(t, "vm", "list", sd); !strings.Contains(out, "node-0") || !strings.Contains(out, "zone-b") || !strings.Contains(out, "10.0.0.2") {
		t.Errorf("vm list:\n%s", out)
	}
	mustRun(t, "vm", "power-off", "node-1", sd)
	if got := vm(t, c, "node-1").Runtime.PowerState; got != "poweredOff" {
		t.Errorf("after power-off: %s", got)
	}
	mustRun(t, "vm", "power-on", "node-1", sd)
	if got := vm(t, c, "node-1").Runtime.PowerState; got != "poweredOn" {
		t.Errorf("after power-on: %s", got)
	}
	mustRun(t, "vm", "shutdown", "node-1", sd)
	if got := vm(t, c, "node-1").Runtime.PowerState; got != "poweredOff" {
		t.Errorf("after shutdown: %s", got)
	}
	out := mustRun(t, "vm", "create", "node-9", "--zone", "zone-a", "--ip", "10.0.9.9", sd, "-o", "json")
	var created vcsim.VM
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Zone != "zone-a" {
		t.Errorf("create -o json: %+v, %v\n%s", created, err, out)
	}
	if got := vm(t, c, "node-9"); got == nil || got.Guest.HostName != "node-9" || got.Guest.IpAddress != "10.0.9.9" {
		t.Errorf("created VM: %+v", got)
	}
	mustRun(t, "vm", "set-guest", "node-9", "--hostname", "renamed", sd)
	if got := vm(t, c, "node-9"); got.Guest.HostName != "renamed" {
		t.Errorf("after set-guest: %+v", got.Guest)
	}
	mustRun(t, "vm", "destroy", "node-9", sd)
	if got := vm(t, c, "node-9"); got != nil {
		t.Errorf("after destroy: %+v", got)
	}
	if out := mustRun(t, "requests", sd, "--reset"); !strings.Contains(out, "RetrievePropertiesEx") || !strings.Contains(out, "Login") {
		t.Errorf("requests:\n%s", out)
	}
	if out := mustRun(t, "requests", sd); !strings.Contains(out, "TOTAL") || strings.Contains(out, "Login") {
		t.Errorf("requests after --reset:\n%s", out)
	}
	// Without --state-dir, $STRATUS_VCSIM_STATE_DIR names it (as the env
	// file of stratus dev --cloud vsphere sets it).
	t.Setenv(vcsim.StateDirEnv, dir)
	if out := mustRun(t, "vm", "get", "node-0", "-o", "json"); !strings.Contains(out, `"name": "node-0"`) && !strings.Contains(out, `"name":"node-0"`) {
		t.Errorf("vm get with $%s:\n%s", vcsim.StateDirEnv, out)
	}

	// Explicit flags override the state dir; errors name what failed.
	if _, err := run(t, "vm", "get", "node-0", sd, "--password", "wrong"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("wrong --password: %v", err)
	}
	if _, err := run(t, "vm", "get", "nope", sd); err == nil || !strings.Contains(err.Error(), "no such VM") {
		t.Errorf("unknown VM: %v", err)
	}
	if _, err := run(t, "vm", "create", "x", "--ip", "1.2.3", sd); err == nil || !strings.Contains(err.Error(), "--ip") {
		t.Errorf("bad --ip: %v", err)
	}
	if _, err := run(t, "vm", "list", sd, "-o", "yaml"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("bad --output: %v", err)
	}
	if _, err := run(t, "vm", "list", sd, "--thumbprint", st.Thumbprint, "--server", st.Server); err != nil {
		t.Errorf("--thumbprint: %v", err)
	}
	// Another --server does not inherit the state dir's CA.
	other := "--server=https://localhost" + strings.TrimPrefix(st.Server, "https://127.0.0.1")
	if _, err := run(t, "vm", "list", sd, other); err == nil || !strings.Contains(err.Error(), "CA file") {
		t.Errorf("--server without trust: %v", err)
	}
	if _, err := run(t, "vm", "power-on", "node-1", "--state-dir", t.TempDir(), other, "--insecure", "--username", "admin", "--password", "s3cret"); err != nil {
		t.Errorf("--insecure without a state dir: %v", err)
	}
}

func TestServeBadFlags(t *testing.T) {
	if _, err := run(t, "--listen", "127.0.0.1:0", "--name-pattern", "node", "--state-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), "NamePattern") {
		t.Errorf("bad --name-pattern: %v", err)
	}
}
