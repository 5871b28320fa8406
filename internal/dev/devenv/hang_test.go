package devenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	cloudprovider "k8s.io/cloud-provider"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/pkg/stratus"
	mcprovider "github.com/stratus-ccm/stratus/providers/minicloud"
	"github.com/stratus-ccm/stratus/providers/vsphere"
	"github.com/stratus-ccm/stratus/vcsim"
)

// TestMinicloudHang drives `stratus dev minicloud hang` through the control
// socket of an environment's minicloud: the address accepts connections and
// never answers; stratus's minicloud provider (timeout 1s) gets an error
// for every call, a transient one, never "the instance is gone"; each call
// that timed out has closed its connection, so nothing piles up at the hung
// server; `start` serves the same state again.
func TestMinicloudHang(t *testing.T) {
	t.Parallel() // its own state dir, port and address block (243, no other test's)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	e := &env{opts: Options{StateDir: dir, Cloud: CloudMinicloud}, out: &out, block: 243}
	e.ports.Minicloud = port
	cloud, err := e.startCloud(ctx, log.Log)
	if err != nil {
		t.Fatal(err)
	}
	defer cloud.stop()
	stopControl, err := e.serveControl(ctx, cloud)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); stopControl() }()

	inst, err := e.cloud.client.CreateInstance(ctx, api.InstanceCreate{Name: "n1", Type: "mc.small", Zone: "mc-central-a"})
	if err != nil {
		t.Fatal(err)
	}
	prov, err := mcprovider.New(&mcprovider.Config{URL: e.cloud.url, Token: e.cloud.token, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	instances, _ := prov.InstancesV2()
	node := &v1.Node{Spec: v1.NodeSpec{ProviderID: mcprovider.ProviderID(inst.ID)}}
	node.Name = "n1"
	if ok, err := instances.InstanceExists(ctx, node); !ok || err != nil {
		t.Fatalf("before the hang: exists %t, %v", ok, err)
	}

	if msg, err := Control(ctx, dir, "minicloud", "hang"); err != nil || !strings.Contains(msg, "hangs") {
		t.Fatalf("hang: %q, %v", msg, err)
	}
	if _, err := Control(ctx, dir, "minicloud", "hang"); err == nil || !strings.Contains(err.Error(), "already hanging") {
		t.Errorf("a second hang: %v, want an error saying it already hangs", err)
	}
	if !strings.Contains(out.String(), "minicloud hangs") {
		t.Errorf("the hang was not narrated: %s", out.String())
	}
	const calls = 5
	for i := range calls {
		ok, err := instances.InstanceExists(ctx, node)
		if err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Fatalf("call %d to a hung cloud: exists %t, %v; want an error that is not \"gone\"", i, ok, err)
		}
		if !stratus.IsTransient(err) {
			t.Errorf("call %d to a hung cloud: %v is not transient (stratus would not retry it as an outage)", i, err)
		}
		if _, err := instances.InstanceShutdown(ctx, node); err == nil {
			t.Errorf("call %d: InstanceShutdown against a hung cloud answered", i)
		}
	}
	// Every call timed out and closed its connection: none is left open at
	// the hung server.
	testsupport.Eventually(t, 10*time.Second, "no connection left open at the hung minicloud", func(context.Context) (bool, error) {
		msg, err := Control(ctx, dir, "minicloud", "status")
		return err == nil && strings.Contains(msg, "hanging") && strings.Contains(msg, "; 0 open)"), err
	})

	if msg, err := Control(ctx, dir, "minicloud", "start"); err != nil {
		t.Fatalf("start after the hang: %q, %v", msg, err)
	}
	if ok, err := instances.InstanceExists(ctx, node); !ok || err != nil {
		t.Errorf("after start: exists %t, %v", ok, err)
	}
	if msg, _ := Control(ctx, dir, "minicloud", "status"); !strings.Contains(msg, "running on") {
		t.Errorf("status after start: %q", msg)
	}
}

// TestVCenterHang drives `stratus dev vcsim hang` through the control
// socket: the vSphere provider's calls (bounded here by the caller's
// deadline; the provider's own bound is 2 minutes) fail as transient
// errors, never "the VM is gone"; the connections the hung
// vCenter holds stay few (each failed call closes its own); `start` brings
// the VM back to the same provider.
func TestVCenterHang(t *testing.T) {
	t.Parallel() // its own simulator, state dir and ports
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	vc, err := vcsim.Start(ctx, vcsim.Options{VMs: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	dir := t.TempDir()
	var out bytes.Buffer
	e := &env{opts: Options{StateDir: dir, Cloud: CloudVSphere}, out: &out, vc: vc}
	stopControl, err := e.serveControl(ctx, &cloudServer{addr: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); stopControl() }()

	cfg, err := vsphere.ParseConfig(bytes.NewReader(vc.CloudConfig(vcsim.TrustThumbprint)))
	if err != nil {
		t.Fatal(err)
	}
	prov, err := vsphere.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer prov.Close()
	vms, err := vc.VMs(ctx)
	if err != nil || len(vms) != 1 {
		t.Fatalf("VMs: %v, %v", vms, err)
	}
	instances, _ := prov.InstancesV2()
	node := &v1.Node{Spec: v1.NodeSpec{ProviderID: "vsphere://" + vms[0].UUID}}
	node.Name = vms[0].Name
	if ok, err := instances.InstanceExists(ctx, node); !ok || err != nil {
		t.Fatalf("before the hang: exists %t, %v", ok, err)
	}

	if msg, err := Control(ctx, dir, "vcsim", "hang"); err != nil || !strings.Contains(msg, "hangs") {
		t.Fatalf("hang: %q, %v", msg, err)
	}
	openAtPit := func() int {
		msg, err := Control(ctx, dir, "vcsim", "status")
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if _, err := fmt.Sscanf(msg[strings.LastIndex(msg, "; ")+2:], "%d open)", &n); err != nil {
			t.Fatalf("status %q: %v", msg, err)
		}
		return n
	}
	for i := range 2 {
		// The provider bounds a call at 2 minutes; the caller's deadline
		// ends it sooner here.
		cctx, ccancel := context.WithTimeout(ctx, 3*time.Second)
		ok, err := instances.InstanceExists(cctx, node)
		ccancel()
		if err == nil || errors.Is(err, cloudprovider.InstanceNotFound) {
			t.Fatalf("call %d to a hung vCenter: exists %t, %v; want an error that is not \"gone\"", i, ok, err)
		}
		if !stratus.IsTransient(err) {
			t.Errorf("call %d to a hung vCenter: %v is not transient", i, err)
		}
		// A call that gave up closed its connection: what is open is at
		// most the provider's calls in flight, not one per call made.
		if n := openAtPit(); n > 2 {
			t.Errorf("after call %d, %d connections are open at the hung vCenter", i, n)
		}
	}

	if msg, err := Control(ctx, dir, "vcsim", "start"); err != nil {
		t.Fatalf("start after the hang: %q, %v", msg, err)
	}
	testsupport.Eventually(t, 60*time.Second, "the VM found again after start", func(ctx context.Context) (bool, error) {
		ok, err := instances.InstanceExists(ctx, node)
		return ok && err == nil, nil
	})
}
