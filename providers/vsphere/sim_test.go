package vsphere

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/stratus-ccm/stratus/vcsim"
)

// sim is a simulated vCenter (vcsim) with node VMs node-0 to
// node-3 that report host names and IPs, in zones zone-a (cluster DC0_C0)
// and zone-b (host DC0_H0) of region-1, plus an administrator client.
type sim struct {
	t     *testing.T
	srv   *vcsim.Server
	admin *vim25.Client
	ctx   context.Context
}

func newSim(t *testing.T, opts ...func(*vcsim.Options)) *sim {
	t.Helper()
	o := vcsim.Options{VMs: 4}
	for _, f := range opts {
		f(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := vcsim.Start(ctx, o)
	if err != nil {
		t.Fatalf("start vcsim: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		srv.Close()
	})
	c, err := srv.Client(ctx)
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	return &sim{t: t, srv: srv, admin: c.Client, ctx: ctx}
}

// hostPort is the simulator's address.
func (s *sim) hostPort() (string, string) {
	h, p, _ := net.SplitHostPort(s.srv.Addr())
	return h, p
}

// config is a YAML cloud config for the simulator that does not verify its
// certificate; extra is appended.
func (s *sim) config(extra string) string {
	return s.strictConfig("    insecureFlag: true\n" + extra)
}

// strictConfig is a YAML cloud config for the simulator; extra (TLS
// settings of the vCenter, more sections) is appended.
func (s *sim) strictConfig(extra string) string {
	h, p := s.hostPort()
	return fmt.Sprintf("global:\n  user: %s\n  password: %s\nvcenter:\n  sim:\n    server: %s\n    port: %s\n%s",
		s.srv.Username(), s.srv.Password(), h, p, extra)
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

// vm returns a VM as the simulator has it.
func (s *sim) vm(name string) vcsim.VM {
	s.t.Helper()
	v, err := s.srv.VM(s.ctx, name)
	if err != nil {
		s.t.Fatal(err)
	}
	return v
}

// object returns a VM for the administrator client.
func (s *sim) object(name string) *object.VirtualMachine {
	return object.NewVirtualMachine(s.admin, s.vm(name).Ref)
}

// setGuest sets what VMware Tools would report for a VM.
func (s *sim) setGuest(name, hostName string, nics ...vcsim.NIC) {
	s.t.Helper()
	if err := s.srv.SetGuest(s.ctx, name, vcsim.Guest{Hostname: hostName, NICs: nics}); err != nil {
		s.t.Fatal(err)
	}
}

func nic(network string, ips ...string) vcsim.NIC { return vcsim.NIC{Network: network, IPs: ips} }

// do fails the test when a simulator operation fails.
func (s *sim) do(what string, err error) {
	s.t.Helper()
	if err != nil {
		s.t.Fatalf("%s: %v", what, err)
	}
}

// ref returns the managed object of a kind (HostSystem, Datacenter, ...)
// with a name.
func (s *sim) ref(kind, name string) types.ManagedObjectReference {
	s.t.Helper()
	v, err := view.NewManager(s.admin).CreateContainerView(s.ctx, s.admin.ServiceContent.RootFolder, []string{kind}, true)
	if err != nil {
		s.t.Fatal(err)
	}
	defer func() { _ = v.Destroy(s.ctx) }()
	var objs []mo.ManagedEntity
	if err := v.Retrieve(s.ctx, []string{kind}, []string{"name"}, &objs); err != nil {
		s.t.Fatal(err)
	}
	for _, o := range objs {
		if o.Name == name {
			return o.Reference()
		}
	}
	s.t.Fatalf("no %s %s", kind, name)
	return types.ManagedObjectReference{}
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
