package minicloud_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/stratus-ccm/stratus/minicloud"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
	"github.com/stratus-ccm/stratus/minicloud/minicloudtest"
)

// serveEnv makes the test binary a minicloud server (see TestMain), so a
// test can kill -9 a real server process.
const serveEnv = "MINICLOUD_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) != "" {
		if err := serveFromEnv(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serveFromEnv() error {
	cfg := minicloud.DefaultConfig()
	cfg.StateDir = os.Getenv("MC_STATE_DIR")
	cfg.Tokens = []string{os.Getenv("MC_TOKEN")}
	cfg.InstanceCIDR = netip.MustParsePrefix(os.Getenv("MC_INSTANCE_CIDR"))
	cfg.PublicCIDR = netip.MustParsePrefix(os.Getenv("MC_PUBLIC_CIDR"))
	cfg.VIPCIDR = netip.MustParsePrefix(os.Getenv("MC_VIP_CIDR"))
	cfg.LBProvisionDelay = 0
	srv, err := minicloud.NewServer(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("LISTEN %s\n", ln.Addr())
	return srv.Serve(context.Background(), ln)
}

// startProcess runs a minicloud server process on env's state and returns
// its client and the process.
func startProcess(t *testing.T, env []string, token string) (*client.Client, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(strings.TrimPrefix(line, "LISTEN "))
	}()
	select {
	case a := <-addr:
		if a == "" {
			t.Fatal("minicloud process exited before listening")
		}
		c, err := client.New("http://"+a, token)
		if err != nil {
			t.Fatal(err)
		}
		return c, cmd
	case <-time.After(20 * time.Second):
		t.Fatal("minicloud process did not start listening within 20s")
	}
	return nil, nil
}

func TestStateSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts server processes")
	}
	ctx := context.Background()
	token := minicloudtest.RandomToken()
	vips := fmt.Sprintf("127.%d.%d.0/24", 100+os.Getpid()%100, time.Now().Nanosecond()%256)
	insts := fmt.Sprintf("127.11.%d.0/24", time.Now().Nanosecond()%256)
	env := []string{serveEnv + "=1", "MC_STATE_DIR=" + t.TempDir(), "MC_TOKEN=" + token,
		"MC_INSTANCE_CIDR=" + insts, "MC_PUBLIC_CIDR=127.21.0.0/24", "MC_VIP_CIDR=" + vips}

	c, proc := startProcess(t, env, token)
	inst, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "n1", Type: "mc.large", Zone: "mc-central-a", PublicIP: true, IPv6: true, Labels: map[string]string{"example.com/team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	be := minicloudtest.StartBackend(t, "n1", inst.PrivateIP, minicloudtest.BackendOptions{TCP: true})
	lb, err := c.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{{Protocol: "TCP", Port: 18090, TargetPort: be.Port}},
		Targets: []api.Target{{InstanceID: inst.ID}}}, client.WithIdempotencyKey("web-1"))
	if err != nil {
		t.Fatal(err)
	}
	route, err := c.CreateRoute(ctx, api.RouteCreate{DestinationCIDR: "10.244.3.0/24", TargetInstanceID: inst.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18090), 1); got["n1"] != 1 {
		t.Fatalf("before the crash: %v", got)
	}

	if err := proc.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	proc.Wait()
	if !minicloudtest.Refused(vipAddr(lb, 18090)) {
		t.Fatal("VIP still answers after the server was killed")
	}

	c, _ = startProcess(t, env, token)
	gotInst, err := c.GetInstance(ctx, inst.ID)
	if err != nil {
		t.Fatalf("instance after restart: %v", err)
	}
	if diff := cmp.Diff(inst, gotInst); diff != "" {
		t.Errorf("instance changed across the crash (-before +after):\n%s", diff)
	}
	gotRoute, err := c.GetRoute(ctx, route.ID)
	if err != nil || !cmp.Equal(route, gotRoute) {
		t.Errorf("route after restart: %+v, %v; want %+v", gotRoute, err, route)
	}
	// The LB listens again.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !minicloudtest.Refused(vipAddr(lb, 18090)), nil
	})
	if err != nil {
		t.Fatalf("LB VIP not listening after restart: %v", err)
	}
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18090), 2); got["n1"] != 2 {
		t.Fatalf("after restart: %v", got)
	}
	// The idempotency key and the sequences survived too.
	again, err := c.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "web", Listeners: []api.Listener{{Protocol: "TCP", Port: 18090, TargetPort: be.Port}},
		Targets: []api.Target{{InstanceID: inst.ID}}}, client.WithIdempotencyKey("web-1"))
	if err != nil || again.ID != lb.ID {
		t.Fatalf("idempotent retry after restart: %+v, %v; want %s", again, err, lb.ID)
	}
	second, err := c.CreateInstance(ctx, api.InstanceCreate{Name: "n2", Type: "mc.small", Zone: "mc-central-a", IPv6: true})
	if err != nil {
		t.Fatal(err)
	}
	if second.ID == inst.ID || second.PrivateIP == inst.PrivateIP || second.PrivateIPv6 == inst.PrivateIPv6 {
		t.Fatalf("new instance %+v reuses the ID or IP of %+v", second, inst)
	}
}

func TestRestartResumesProvisioning(t *testing.T) {
	ctx := context.Background()
	first := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 300 * time.Millisecond})
	inst := newInstance(t, first.Client, "n", nil)
	be := minicloudtest.StartBackend(t, "n", inst.PrivateIP, minicloudtest.BackendOptions{TCP: true})
	lb, err := first.Client.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "web",
		Listeners: []api.Listener{{Protocol: "TCP", Port: 18091, TargetPort: be.Port}}, Targets: []api.Target{{InstanceID: inst.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	cfg := first.Config
	second := minicloudtest.Start(t, minicloudtest.Options{Token: first.Token, StateDir: cfg.StateDir, LBProvisionDelay: cfg.LBProvisionDelay,
		InstanceCIDR: cfg.InstanceCIDR, PublicCIDR: cfg.PublicCIDR, VIPCIDR: cfg.VIPCIDR})
	second.WaitLoadBalancer(t, lb.ID, minicloudtest.Active)
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !minicloudtest.Refused(vipAddr(lb, 18091)), nil
	})
	if err != nil {
		t.Fatalf("LB that finished provisioning after a restart does not listen: %v", err)
	}
	if got := minicloudtest.CountTCP(t, vipAddr(lb, 18091), 1); got["n"] != 1 {
		t.Fatalf("traffic: %v", got)
	}
}

// With NoDataPlane, load balancers provision and become active as usual, but
// nothing listens on the VIP.
func TestNoDataPlane(t *testing.T) {
	ctx := context.Background()
	mc := minicloudtest.Start(t, minicloudtest.Options{LBProvisionDelay: 100 * time.Millisecond, NoDataPlane: true})
	inst := newInstance(t, mc.Client, "n", nil)
	be := minicloudtest.StartBackend(t, "n", inst.PrivateIP, minicloudtest.BackendOptions{TCP: true})
	lb, err := mc.Client.CreateLoadBalancer(ctx, api.LoadBalancerSpec{Name: "web",
		Listeners: []api.Listener{{Protocol: "TCP", Port: 18092, TargetPort: be.Port}}, Targets: []api.Target{{InstanceID: inst.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	mc.WaitLoadBalancer(t, lb.ID, minicloudtest.Active)
	if !minicloudtest.Refused(vipAddr(lb, 18092)) {
		t.Error("VIP accepts connections without a data plane")
	}
	got, err := mc.Client.GetLoadBalancer(ctx, lb.ID)
	if err != nil || len(got.TargetHealth) != 1 || got.TargetHealth[0].State != api.HealthUnknown {
		t.Errorf("target health without a data plane: %+v, %v; want one unknown", got, err)
	}
}
