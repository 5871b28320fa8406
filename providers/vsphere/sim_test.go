package vsphere

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/wait"

	_ "github.com/vmware/govmomi/vapi/simulator" // the vAPI (tags) endpoints
)

// Credentials the test vCenters accept.
const (
	simUser     = "admin"
	simPassword = "s3cret-pw"
)

// sim is an in-process vCenter (govmomi's simulator) with TLS, vAPI
// endpoints and a user name and password of its own, plus an
// administrator client for changing its inventory.
type sim struct {
	t      *testing.T
	model  *simulator.Model
	server *simulator.Server
	admin  *vim25.Client
	ctx    context.Context
}

func newSim(t *testing.T) *sim {
	t.Helper()
	m := simulator.VPX()
	if err := m.Create(); err != nil {
		t.Fatalf("create simulator model: %v", err)
	}
	m.Service.RegisterEndpoints = true
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword(simUser, simPassword)}
	s := m.Service.NewServer()
	t.Cleanup(func() {
		s.Close()
		m.Remove()
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	u := *s.URL
	u.User = url.UserPassword(simUser, simPassword)
	c, err := govmomi.NewClient(ctx, &u, true)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	return &sim{t: t, model: m, server: s, admin: c.Client, ctx: ctx}
}

// hostPort is the simulator's address.
func (s *sim) hostPort() (string, string) {
	h, p, _ := net.SplitHostPort(s.server.URL.Host)
	return h, p
}

// config is a YAML cloud config for the simulator; extra is appended.
func (s *sim) config(extra string) string {
	h, p := s.hostPort()
	return fmt.Sprintf("global:\n  user: %s\n  password: %s\n  insecureFlag: true\nvcenter:\n  sim:\n    server: %s\n    port: %s\n%s",
		simUser, simPassword, h, p, extra)
}

// cloud returns a provider for config text, closed at the end of the
// test, whose requests rec records (when not nil).
func (s *sim) cloud(config string, rec *recorder) *Cloud {
	s.t.Helper()
	cfg, err := ParseConfig(strings.NewReader(config))
	if err != nil {
		s.t.Fatalf("ParseConfig: %v", err)
	}
	c, err := New(cfg)
	if err != nil {
		s.t.Fatalf("New: %v", err)
	}
	if rec != nil {
		for _, v := range c.vcs {
			v.conn.wrap = rec.wrap
		}
	}
	s.t.Cleanup(c.Close)
	return c
}

// vms returns the simulator's VMs by name.
func (s *sim) vms() map[string]*object.VirtualMachine {
	s.t.Helper()
	out := map[string]*object.VirtualMachine{}
	for _, e := range s.model.Map().All("VirtualMachine") {
		v := e.(*simulator.VirtualMachine)
		out[v.Name] = object.NewVirtualMachine(s.admin, v.Reference())
	}
	return out
}

// vmUUID returns a VM's BIOS UUID as vCenter reports it.
func (s *sim) vmUUID(name string) string {
	s.t.Helper()
	var o mo.VirtualMachine
	if err := s.vms()[name].Properties(s.ctx, s.vms()[name].Reference(), []string{"config.uuid"}, &o); err != nil {
		s.t.Fatalf("uuid of %s: %v", name, err)
	}
	return o.Config.Uuid
}

// setGuest sets what VMware Tools would report for a VM: its host name and
// NICs.
func (s *sim) setGuest(name, hostName string, nics ...types.GuestNicInfo) {
	s.t.Helper()
	ref := s.vms()[name].Reference()
	obj := s.model.Map().Get(ref)
	for i := range nics {
		if nics[i].DeviceConfigId == 0 {
			nics[i].DeviceConfigId = int32(4000 + i)
		}
	}
	s.model.Map().AtomicUpdate(s.model.Service.Context, obj, []types.PropertyChange{
		{Name: "guest.hostName", Val: hostName},
		{Name: "guest.net", Val: nics},
	})
}

func nic(network string, ips ...string) types.GuestNicInfo {
	return types.GuestNicInfo{Network: network, IpAddress: ips, Connected: true}
}

// task waits for a VM task.
func (s *sim) task(what string, t *object.Task, err error) {
	s.t.Helper()
	if err == nil {
		err = t.Wait(s.ctx)
	}
	if err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

// createVM creates and powers on a VM in the cluster's resource pool.
func (s *sim) createVM(name string) {
	s.t.Helper()
	var finderVM *object.VirtualMachine
	for _, n := range []string{"DC0_C0_RP0_VM0", "DC0_C0_RP0_VM1"} {
		if v := s.vms()[n]; v != nil {
			finderVM = v
			break
		}
	}
	var o mo.VirtualMachine
	if err := finderVM.Properties(s.ctx, finderVM.Reference(), []string{"resourcePool", "parent"}, &o); err != nil {
		s.t.Fatal(err)
	}
	folder := object.NewFolder(s.admin, *o.Parent)
	pool := object.NewResourcePool(s.admin, *o.ResourcePool)
	spec := types.VirtualMachineConfigSpec{Name: name, GuestId: "ubuntu64Guest", NumCPUs: 2, MemoryMB: 4096,
		Files: &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"}}
	t, err := folder.CreateVM(s.ctx, spec, pool, nil)
	s.task("create VM "+name, t, err)
	vm := s.vms()[name]
	t, err = vm.PowerOn(s.ctx)
	s.task("power on "+name, t, err)
}

// recorder records the provider's SOAP methods and property paths, and
// its REST requests.
type recorder struct {
	mu      sync.Mutex
	methods []string
	paths   []string
	rest    []string
}

var (
	soapMethod = regexp.MustCompile(`<Body[^>]*>\s*<(\w+)`)
	pathSet    = regexp.MustCompile(`<pathSet>([^<]*)</pathSet>`)
)

func (r *recorder) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		var body []byte
		if req.Body != nil {
			body, _ = io.ReadAll(req.Body)
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		r.mu.Lock()
		if strings.HasSuffix(req.URL.Path, "/sdk") {
			if m := soapMethod.FindSubmatch(body); m != nil {
				r.methods = append(r.methods, string(m[1]))
			}
			for _, m := range pathSet.FindAllSubmatch(body, -1) {
				r.paths = append(r.paths, string(m[1]))
			}
		} else {
			r.rest = append(r.rest, req.Method+" "+req.URL.Path)
		}
		r.mu.Unlock()
		return next.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// count returns how many times method was called.
func (r *recorder) count(method string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, m := range r.methods {
		if m == method {
			n++
		}
	}
	return n
}

func (r *recorder) allPaths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...)
}

func (r *recorder) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.methods) + len(r.rest)
}

// eventually waits until cond holds, failing the test after a deadline
// with the last state cond described.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	last := ""
	err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		ok, state := cond()
		last = state
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; last state: %s", what, err, last)
	}
}
