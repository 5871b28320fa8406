package chaos

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager/managertest"
	"github.com/stratus-ccm/stratus/minicloud/api"
	"github.com/stratus-ccm/stratus/minicloud/client"
)

// minicloudEnv carries the `stratus minicloud` command line of a cloud child
// process (the test binary re-executed, see TestMain).
const minicloudEnv = "STRATUS_CHAOS_MINICLOUD_ARGS"

// cloudProcess is `stratus minicloud serve` in a child process on a fixed
// port and state directory, so that it can be killed with SIGKILL and
// started again on its persistent state at the same address.
type cloudProcess struct {
	t    *testing.T
	args []string
	url  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs []*testsupport.LockedBuffer // one per incarnation
}

func startCloud(t *testing.T, dir, tokenFile string, pools [3]string, extra ...string) *cloudProcess {
	t.Helper()
	port := testsupport.FreePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := &cloudProcess{t: t, url: "http://" + addr, args: []string{"serve",
		"--listen=" + addr, "--state-dir=" + dir, "--token-file=" + tokenFile,
		"--instance-cidr=" + pools[0], "--public-cidr=" + pools[1], "--vip-cidr=" + pools[2],
		"--lb-provision-delay=1s", "--openstack=false",
	}}
	c.args = append(c.args, extra...)
	c.start()
	t.Cleanup(c.kill)
	return c
}

func (c *cloudProcess) start() {
	c.t.Helper()
	raw, err := json.Marshal(c.args)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), minicloudEnv+"="+string(raw))
	out := &testsupport.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start minicloud: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.logs = append(c.logs, out)
	c.mu.Unlock()
}

// kill sends SIGKILL and waits until the process is gone.
func (c *cloudProcess) kill() {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// output is everything every incarnation logged.
func (c *cloudProcess) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for i, l := range c.logs {
		fmt.Fprintf(&b, "=== minicloud incarnation %d\n%s", i+1, l.String())
	}
	return b.String()
}

// waitUp waits until the API answers.
func (c *cloudProcess) waitUp(ctx context.Context, cl *client.Client) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cl.Regions(ctx)
		return err == nil, nil
	})
}

// cloudFront is what the managers reach minicloud through: a reverse proxy
// that, while empty is set, answers every unfiltered instance listing (as
// the provider's listingRule matches it) with no instances and no next
// page, a cloud whose inventory briefly comes back empty. Filtered lookups
// and everything else pass unchanged. Each replica reaches it at its own
// address (urls[i] for replica i+1), so that the front can tell which
// replica made each write.
type cloudFront struct {
	urls   []string
	mu     sync.Mutex
	empty  bool
	hits   int            // listings emptied
	writes [][]cloudWrite // per replica
	// calls is every request of any replica (writes and reads), for the
	// rate of cloud calls after the faults stopped (callRates).
	calls []cloudWrite
}

// cloudWrite is a write request (any method but GET and HEAD) a replica
// sent to the cloud.
type cloudWrite struct {
	at   time.Time
	what string // method and path
	// query is the request's query parameter names (sorted, comma
	// separated): a lookup by name and a listing by tag are both GETs of
	// the collection.
	query string
}

func startCloudFront(t *testing.T, target string, replicas int, listing listingRule) *cloudFront {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	f := &cloudFront{writes: make([][]cloudWrite, replicas)}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ModifyResponse = func(resp *http.Response) error {
		if !listing.matches(resp.Request) || resp.StatusCode != http.StatusOK {
			return nil
		}
		f.mu.Lock()
		empty := f.empty
		if empty {
			f.hits++
		}
		f.mu.Unlock()
		if !empty {
			return nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		body := listing.empty
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	// An unreachable cloud (killed) is a 502 to the manager, as a real
	// cloud's load balancer in front of a dead API answers.
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		http.Error(w, `{"error":{"code":"internal","message":"cloud unreachable"}}`, http.StatusBadGateway)
	}
	for i := range replicas {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			call := cloudWrite{at: time.Now(), what: req.Method + " " + req.URL.Path, query: strings.Join(slices.Sorted(maps.Keys(req.URL.Query())), ",")}
			f.mu.Lock()
			if req.Method != http.MethodGet && req.Method != http.MethodHead {
				f.writes[i] = append(f.writes[i], call)
			}
			f.calls = append(f.calls, call)
			f.mu.Unlock()
			rp.ServeHTTP(w, req)
		})}
		go func() { _ = srv.Serve(ln) }()
		t.Cleanup(func() { srv.Close() })
		f.urls = append(f.urls, "http://"+ln.Addr().String())
	}
	return f
}

// writesBetween is what replica id wrote to the cloud in [from, to].
func (f *cloudFront) writesBetween(id int, from, to time.Time) []cloudWrite {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []cloudWrite
	for _, w := range f.writes[id-1] {
		if !w.at.Before(from) && !w.at.After(to) {
			out = append(out, w)
		}
	}
	return out
}

// callRates summarizes the requests of all replicas from from to to, per
// period: how many, and of which kinds (method and collection, the most
// frequent first), each period labelled by its start's offset from origin. It shows whether the managers were busy at their request
// budget or idle while something else held the convergence.
func (f *cloudFront) callRates(origin, from, to time.Time, period time.Duration) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := int(to.Sub(from)/period) + 1
	kinds := make([]map[string]int, n)
	totals := make([]int, n)
	for _, c := range f.calls {
		if c.at.Before(from) || c.at.After(to) {
			continue
		}
		i := int(c.at.Sub(from) / period)
		if kinds[i] == nil {
			kinds[i] = map[string]int{}
		}
		kinds[i][callKind(c.what, c.query)]++
		totals[i]++
	}
	out := make([]string, n)
	for i := range n {
		byCount := slices.SortedFunc(maps.Keys(kinds[i]), func(a, b string) int {
			return cmp.Or(kinds[i][b]-kinds[i][a], strings.Compare(a, b))
		})
		parts := make([]string, len(byCount))
		for j, k := range byCount {
			parts[j] = fmt.Sprintf("%s %d", k, kinds[i][k])
		}
		out[i] = fmt.Sprintf("%+.0fs: %d requests (%.1f/s) %s", from.Add(time.Duration(i)*period).Sub(origin).Seconds(), totals[i], float64(totals[i])/period.Seconds(), strings.Join(parts, ", "))
	}
	return out
}

// callKind is a request's method, collection and what of it it names: one
// item ("PUT /v1/load-balancers/{id}") or the collection with its query
// parameters' names ("GET /v1/load-balancers?name", a lookup by name;
// "GET /v1/load-balancers?page_size,tag,view", a listing).
func callKind(what, query string) string {
	method, path, _ := strings.Cut(what, " ")
	segs := strings.SplitN(strings.TrimPrefix(path, "/"), "/", 4)
	kind := method + " /" + strings.Join(segs[:min(2, len(segs))], "/")
	switch {
	case len(segs) > 2:
		kind += "/{id}" + strings.Repeat("/…", len(segs)-3)
	case query != "":
		kind += "?" + query
	}
	return kind
}

func (f *cloudFront) setEmpty(on bool) {
	f.mu.Lock()
	f.empty = on
	f.mu.Unlock()
}

func (f *cloudFront) emptied() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits
}

// partitionProxy is a TCP proxy in front of the API server for one replica.
// Cut drops every connection through it and holds new ones open without
// forwarding a byte (a network partition: requests hang until their
// deadline); Heal forwards again.
type partitionProxy struct {
	addr   string
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]bool // both ends of forwarded connections
	held  []net.Conn
}

func startProxy(t *testing.T, target string) *partitionProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &partitionProxy{addr: ln.Addr().String(), target: target, conns: map[net.Conn]bool{}}
	go p.serve(ln)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.Heal()
	})
	return p
}

func (p *partitionProxy) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.held = append(p.held, c)
			p.mu.Unlock()
			continue
		}
		p.mu.Unlock()
		go p.forward(c)
	}
}

func (p *partitionProxy) forward(c net.Conn) {
	up, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		up.Close()
		c.Close()
		return
	}
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
	}
	go pipe(up, c)
	go pipe(c, up)
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// Cut partitions the replica from the API server.
func (p *partitionProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		c.Close()
	}
}

// Heal ends the partition; connections held during it are closed, so that
// their clients reconnect.
func (p *partitionProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for _, c := range p.held {
		c.Close()
	}
	p.held = nil
}

// replica is one stratus-ccm replica: a child process reaching the API
// server through its own partitionProxy, restarted whenever it exits (as
// its Deployment would), until stop.
type replica struct {
	id    int
	args  []string
	proxy *partitionProxy

	mu       sync.Mutex
	proc     *managertest.Process
	alive    bool
	outputs  []*managertest.Process // every incarnation, for the logs
	exits    int
	stopping bool
}

func newReplica(t *testing.T, id int, env *rest.Config, apiAddr string, args []string) *replica {
	t.Helper()
	r := &replica{id: id, proxy: startProxy(t, apiAddr)}
	cfg := rest.CopyConfig(env)
	cfg.Host = "https://" + r.proxy.addr
	r.args = append([]string{"--kubeconfig=" + managertest.WriteKubeconfig(t, cfg)}, args...)
	return r
}

// supervise starts the replica and restarts it each time it exits.
func (r *replica) supervise(t *testing.T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping {
		return
	}
	p := managertest.StartProcess(t, r.args...)
	r.proc, r.alive = p, true
	r.outputs = append(r.outputs, p)
	go func() {
		_ = p.Wait(24 * time.Hour)
		r.mu.Lock()
		r.alive = false
		r.exits++
		r.mu.Unlock()
		r.supervise(t)
	}()
}

// leading reports whether the running incarnation has acquired the lease
// (a replica that loses it exits, so an incarnation leads from its
// acquisition until it dies).
func (r *replica) leading() (*managertest.Process, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.alive {
		return nil, false
	}
	return r.proc, strings.Contains(r.proc.Output(), "Successfully acquired lease")
}

// renewFailed reports whether p logged, after its first `from` bytes of
// output, that its renew loop lost the lease (client-go's leader election
// logs it as it stops leading).
func renewFailed(p *managertest.Process, from int) bool {
	out := p.Output()
	return len(out) > from && strings.Contains(out[from:], "Failed to renew lease")
}

func (r *replica) running(p *managertest.Process) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.alive && r.proc == p
}

func (r *replica) stop() {
	r.mu.Lock()
	r.stopping = true
	p := r.proc
	r.mu.Unlock()
	_ = p.Signal(syscall.SIGKILL)
	_ = p.Wait(time.Minute)
}

func (r *replica) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for i, p := range r.outputs {
		fmt.Fprintf(&b, "=== replica %d incarnation %d\n%s", r.id, i+1, p.Output())
	}
	return b.String()
}

// writeLogs saves every process's output under dir.
func writeLogs(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("chaos logs: %w", err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return fmt.Errorf("chaos logs: %w", err)
		}
	}
	return nil
}

// faultsOff clears the cloud's injected faults, retrying while it is down.
func faultsOff(ctx context.Context, cl *client.Client) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cl.SetFaults(ctx, api.Faults{})
		return err == nil, nil
	})
}

// netnsEnv marks the test binary re-run in a network namespace of its own.
const netnsEnv = "STRATUS_CHAOS_NETNS"

// advertiseIP is the API server's address in that namespace (TEST-NET-1).
const advertiseIP = "192.0.2.1"

// ownNetwork runs the test in a network namespace of its own, where the
// simulated nodes' NodePorts can listen on every address (one socket per
// port for all nodes, see devenv.NodePorts) without taking the node ports
// of other programs on the host, and with the open-file limit raised for
// the run's thousands of connections. As root (needed for both) it re-runs
// the test binary in a new namespace and returns that run's exit code and
// true; inside that run it brings up the loopback interface and reports
// isolated; elsewhere (not root, or namespaces not allowed) the test runs
// in the host's network with a listener per node and port.
func ownNetwork() (code int, reran, isolated bool) {
	if os.Getenv(netnsEnv) != "" {
		// Loopback up, and a default route with a global address on it:
		// kube-apiserver advertises the address of the default route's
		// interface and does not start without one. Nothing leaves the
		// namespace (there is no other interface).
		for _, args := range [][]string{
			{"link", "set", "lo", "up"},
			{"addr", "add", advertiseIP + "/32", "dev", "lo"},
			{"route", "add", "default", "dev", "lo"},
		} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: ip %s in the test's network namespace: %v: %s\n", strings.Join(args, " "), err, out)
				os.Exit(2)
			}
		}
		return 0, false, true
	}
	if os.Getuid() != 0 {
		return 0, false, false
	}
	raiseOpenFiles()
	// Pdeathsig follows the thread that started the child.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), netnsEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: no network namespace of its own (%v); running in the host's network\n", err)
		return 0, false, false
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, true, false
	case errors.As(err, &exit) && exit.ExitCode() > 0:
		return exit.ExitCode(), true, false
	default:
		fmt.Fprintf(os.Stderr, "chaos: test run in its network namespace: %v\n", err)
		return 1, true, false
	}
}

// raiseOpenFiles lifts the open-file limit to the kernel's maximum
// (fs.nr_open, at most 1<<20) where allowed: each load balancer connection through
// minicloud's data plane and each health probe holds descriptors in two
// processes. Children inherit it.
func raiseOpenFiles() {
	raw, err := os.ReadFile("/proc/sys/fs/nr_open")
	if err != nil {
		return
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil {
		return
	}
	n = min(n, 1<<20)
	// Without CAP_SYS_RESOURCE the hard limit stays (Go has already raised
	// the soft limit to it); the shared node ports need far fewer.
	_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n})
}

func TestCallKind(t *testing.T) {
	for _, tc := range []struct{ what, query, want string }{
		{"PUT /v1/load-balancers/lb-1", "", "PUT /v1/load-balancers/{id}"},
		{"GET /v1/load-balancers", "name", "GET /v1/load-balancers?name"},
		{"GET /v1/load-balancers", "page_size,tag,view", "GET /v1/load-balancers?page_size,tag,view"},
		{"GET /v1/instances", "", "GET /v1/instances"},
		{"POST /v1/load-balancers/lb-1/extra", "", "POST /v1/load-balancers/{id}/…"},
	} {
		if got := callKind(tc.what, tc.query); got != tc.want {
			t.Errorf("callKind(%q, %q) = %q, want %q", tc.what, tc.query, got, tc.want)
		}
	}
}
