package minicloudcmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// run executes `minicloud args...` against mc and returns stdout.
func run(t *testing.T, mc *minicloudtest.Cloud, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(args, "--url", mc.URL, "--token", mc.Token))
	cmd.SilenceUsage = true
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func mustRun(t *testing.T, mc *minicloudtest.Cloud, args ...string) string {
	t.Helper()
	out, err := run(t, mc, args...)
	if err != nil {
		t.Fatalf("minicloud %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestCommands(t *testing.T) {
	mc := minicloudtest.Start(t, minicloudtest.Options{})
	ctx := context.Background()

	out := mustRun(t, mc, "instances", "create", "node-1", "--type", "mc.medium", "--zone", "mc-central-b", "--tag", "cluster=dev", "--public-ip")
	if !strings.Contains(out, "PRIVATE IP") || !strings.Contains(out, "node-1") || !strings.Contains(out, "cluster=dev") {
		t.Fatalf("create output:\n%s", out)
	}
	insts, err := mc.Client.ListInstances(ctx, client.ListOptions{Name: "node-1"})
	if err != nil || len(insts) != 1 || insts[0].Type != "mc.medium" || insts[0].Zone != "mc-central-b" || insts[0].PublicIP == "" {
		t.Fatalf("instance created by the CLI: %+v, %v", insts, err)
	}
	id := insts[0].ID

	var listed []api.Instance
	if err := json.Unmarshal([]byte(mustRun(t, mc, "instances", "list", "-o", "json", "--tag", "cluster=dev")), &listed); err != nil || len(listed) != 1 || listed[0].ID != id {
		t.Fatalf("list -o json: %+v, %v", listed, err)
	}
	mustRun(t, mc, "instances", "stop", id)
	if inst, _ := mc.Client.GetInstance(ctx, id); inst.State != api.InstanceStopped {
		t.Fatalf("after `instances stop`: %s", inst.State)
	}
	mustRun(t, mc, "instances", "start", id)
	if inst, _ := mc.Client.GetInstance(ctx, id); inst.State != api.InstanceRunning {
		t.Fatalf("after `instances start`: %s", inst.State)
	}

	out = mustRun(t, mc, "lbs", "create", "web", "--listener", "TCP:18080:30080", "--listener", "udp:18053:30053", "--target", id, "--target", "127.0.0.9",
		"--health-check", "HTTP:10256:/healthz", "--health-interval", "2", "--source-range", "10.0.0.0/8", "--tag", "svc=web")
	if !strings.Contains(out, "TCP:18080->30080") {
		t.Fatalf("lbs create output:\n%s", out)
	}
	lbs, err := mc.Client.ListLoadBalancers(ctx, client.ListOptions{Name: "web"})
	if err != nil || len(lbs) != 1 {
		t.Fatalf("LB created by the CLI: %+v, %v", lbs, err)
	}
	lb := lbs[0]
	if len(lb.Listeners) != 2 || len(lb.Targets) != 2 || lb.HealthCheck == nil || lb.HealthCheck.Path != "/healthz" || lb.HealthCheck.IntervalSeconds != 2 || lb.SourceRanges[0] != "10.0.0.0/8" || lb.Tags["svc"] != "web" {
		t.Fatalf("LB created by the CLI: %+v", lb)
	}
	mustRun(t, mc, "lbs", "update", lb.ID, "--listener", "TCP:18081:30081")
	if got, _ := mc.Client.GetLoadBalancer(ctx, lb.ID); len(got.Listeners) != 1 || got.Listeners[0].Port != 18081 || len(got.Targets) != 0 {
		t.Fatalf("after `lbs update`: %+v", got)
	}
	if out := mustRun(t, mc, "lbs", "list"); !strings.Contains(out, lb.VIP) {
		t.Fatalf("lbs list:\n%s", out)
	}

	mustRun(t, mc, "routes", "create", "10.244.0.0/24", id, "--tag", "cluster=dev")
	routes, err := mc.Client.ListRoutes(ctx, client.ListOptions{})
	if err != nil || len(routes) != 1 || routes[0].TargetInstanceID != id {
		t.Fatalf("route created by the CLI: %+v, %v", routes, err)
	}
	if out := mustRun(t, mc, "routes", "list"); !strings.Contains(out, "10.244.0.0/24") {
		t.Fatalf("routes list:\n%s", out)
	}

	if out := mustRun(t, mc, "stats", "--reset"); !strings.Contains(out, "POST /v1/instances") || !strings.Contains(out, "TOTAL") {
		t.Fatalf("stats:\n%s", out)
	}
	if st, _ := mc.Client.Stats(ctx); st.Total != 0 {
		t.Fatalf("stats --reset left %d", st.Total)
	}
	mustRun(t, mc, "faults", "set", "--latency-ms", "5", "--op", "GET /v1/regions")
	if f, _ := mc.Client.Faults(ctx); f.LatencyMS != 5 || len(f.Operations) != 1 {
		t.Fatalf("faults after set: %+v", f)
	}
	mustRun(t, mc, "faults", "set", "--hold-provisioning")
	if f, _ := mc.Client.Faults(ctx); !f.HoldProvisioning || f.LatencyMS != 0 {
		t.Fatalf("faults after set --hold-provisioning: %+v", f)
	}
	mustRun(t, mc, "faults", "set")
	if f, _ := mc.Client.Faults(ctx); f.LatencyMS != 0 || f.HoldProvisioning {
		t.Fatalf("faults after clearing: %+v", f)
	}

	mustRun(t, mc, "routes", "delete", routes[0].ID)
	mustRun(t, mc, "lbs", "delete", lb.ID)
	mustRun(t, mc, "instances", "delete", id)
	if _, err := mc.Client.GetInstance(ctx, id); !client.IsNotFound(err) {
		t.Fatalf("after `instances delete`: %v", err)
	}
	// Errors of the API reach the user.
	if _, err := run(t, mc, "instances", "get", id); !client.IsNotFound(err) {
		t.Fatalf("get of a deleted instance: %v", err)
	}
	if _, err := run(t, mc, "lbs", "create", "x", "--listener", "TCP:0"); err == nil {
		t.Fatal("bad listener flag accepted")
	}
}

func TestServeTokenFile(t *testing.T) {
	dir := t.TempDir()
	o := serveOptions{stateDir: dir}
	cmd := NewCommand()
	cmd.SetOut(&bytes.Buffer{})
	first, err := o.resolveTokens(cmd)
	if err != nil || len(first) != 1 || len(first[0]) < 16 {
		t.Fatalf("generated token %v, %v", first, err)
	}
	again, err := o.resolveTokens(cmd)
	if err != nil || again[0] != first[0] {
		t.Fatalf("second start got token %v, want the stored %v", again, first)
	}
	// The client commands find the same file.
	f := clientFlags{url: "http://127.0.0.1:1", output: "table", tokenFile: filepath.Join(dir, tokenFileName)}
	if _, err := f.client(); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(dir, "explicit")
	if err := os.WriteFile(tf, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o = serveOptions{stateDir: dir, tokenFile: tf, tokens: []string{"other"}}
	if got, err := o.resolveTokens(cmd); err != nil || len(got) != 2 || got[1] != "secret" {
		t.Fatalf("--token plus --token-file: %v, %v", got, err)
	}
}

func TestServe(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	cmd := NewCommand()
	cmd.SetOut(pw)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--listen", "127.0.0.1:0", "--state-dir", dir, "--lb-provision-delay", "0s",
		"--vip-cidr", "127.101.77.0/24", "--instance-cidr", "127.11.77.0/24", "--rate-limit", "100"})
	done := make(chan error, 1)
	go func() {
		done <- cmd.ExecuteContext(ctx)
		pw.Close()
	}()
	url := ""
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "minicloud listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	go io.Copy(io.Discard, pr)
	if url == "" {
		t.Fatalf("serve did not report its address: %v", <-done)
	}
	token, err := os.ReadFile(filepath.Join(dir, tokenFileName))
	if err != nil {
		t.Fatalf("serve did not write a token: %v", err)
	}
	c, err := client.New(url, strings.TrimSpace(string(token)))
	if err != nil {
		t.Fatal(err)
	}
	inst, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "n", Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	if inst.PrivateIP != "127.11.77.1" {
		t.Errorf("--instance-cidr not applied: %s", inst.PrivateIP)
	}
	lb, err := c.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{{Protocol: "TCP", Port: 18095, TargetPort: 1}}})
	if err != nil || lb.State != api.LBActive || lb.VIP != "127.101.77.1" {
		t.Errorf("--lb-provision-delay 0s / --vip-cidr not applied: %+v, %v", lb, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve after cancel: %v", err)
	}
}
