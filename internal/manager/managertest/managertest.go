// Package managertest runs the stratus manager in tests: it registers the
// upstream fake provider as "fake" (recording Initialize and SetInformers), writes
// kubeconfig files for test identities, and starts managers in-process or as a
// child process that a test can kill.
package managertest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/fake"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	"github.com/stratus-ccm/stratus/internal/manager"
	"github.com/stratus-ccm/stratus/pkg/app"
)

// ProviderName is the registered name of the test provider.
const ProviderName = "fake"

// ExternalIP is the load-balancer address the test provider hands out.
const ExternalIP = "203.0.113.10"

// Zone and Region are what the test provider reports for every instance.
const (
	Zone   = "zone-a"
	Region = "region-1"
)

func init() {
	cloudprovider.RegisterCloudProvider(ProviderName, func(io.Reader) (cloudprovider.Interface, error) {
		c := &Cloud{Cloud: &fake.Cloud{
			Exists:             true,
			ExistsByProviderID: true,
			EnableInstancesV2:  true,
			DisableRoutes:      true,
			Provider:           ProviderName,
			ExternalIP:         net.ParseIP(ExternalIP),
			Zone:               cloudprovider.Zone{FailureDomain: Zone, Region: Region},
		}}
		mu.Lock()
		clouds = append(clouds, c)
		mu.Unlock()
		return c, nil
	})
}

var (
	mu     sync.Mutex
	clouds []*Cloud
)

// Clouds returns every provider instance the registry created, oldest first.
func Clouds() []*Cloud {
	mu.Lock()
	defer mu.Unlock()
	return append([]*Cloud(nil), clouds...)
}

// Cloud is fake.Cloud plus a record of Initialize and SetInformers.
type Cloud struct {
	*fake.Cloud
	initialized  atomic.Bool
	hasInformers atomic.Bool
}

// Initialize records the call.
func (c *Cloud) Initialize(b cloudprovider.ControllerClientBuilder, stop <-chan struct{}) {
	c.initialized.Store(true)
	c.Cloud.Initialize(b, stop)
}

// SetInformers records the call.
func (c *Cloud) SetInformers(informers.SharedInformerFactory) { c.hasInformers.Store(true) }

// Initialized reports whether Initialize was called.
func (c *Cloud) Initialized() bool { return c.initialized.Load() }

// HasInformers reports whether SetInformers was called.
func (c *Cloud) HasInformers() bool { return c.hasInformers.Load() }

// WriteKubeconfig writes cfg as a kubeconfig file in a test temp dir.
func WriteKubeconfig(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.CAData,
		CertificateAuthority:     cfg.CAFile,
		InsecureSkipTLSVerify:    cfg.Insecure,
	}
	kc.AuthInfos["test"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.CertData,
		ClientKeyData:         cfg.KeyData,
		ClientCertificate:     cfg.CertFile,
		ClientKey:             cfg.KeyFile,
	}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return path
}

// Options parses args as the stratus-ccm command line.
func Options(t testing.TB, args ...string) *manager.Options {
	t.Helper()
	o := manager.NewOptions()
	fs := pflag.NewFlagSet("stratus-ccm", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o
}

// Manager is a manager running in the test process.
type Manager struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// Start runs manager.Run with the command line args until Stop or the end of the
// test.
func Start(t testing.TB, args ...string) *Manager {
	t.Helper()
	o := Options(t, args...)
	ctx, cancel := context.WithCancel(context.Background())
	logger := klog.NewKlogr()
	ctrl.SetLogger(logger)
	m := &Manager{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		m.err = manager.Run(log.IntoContext(ctx, logger), o)
	}()
	t.Cleanup(func() { m.Stop() })
	return m
}

// Stop cancels the manager (as SIGTERM does) and returns what Run returned.
func (m *Manager) Stop() error {
	m.cancel()
	<-m.done
	return m.err
}

// Done is closed when Run has returned.
func (m *Manager) Done() <-chan struct{} { return m.done }

// Err is what Run returned; valid after Done.
func (m *Manager) Err() error { return m.err }

// helperEnv carries the command line of a manager child process.
const (
	helperEnv  = "STRATUS_MANAGERTEST_ARGS"
	commandEnv = "STRATUS_MANAGERTEST_COMMAND"
)

// RunHelperProcess runs the manager (or the stratus-ccm command line) and
// exits when the process was started by StartProcess (or StartCommand);
// otherwise it returns at once. Call it first in TestMain.
func RunHelperProcess() {
	if raw := os.Getenv(commandEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		os.Exit(app.Main("test", args...))
	}
	raw := os.Getenv(helperEnv)
	if raw == "" {
		return
	}
	var args []string
	if err := json.Unmarshal([]byte(raw), &args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	o := manager.NewOptions()
	fs := pflag.NewFlagSet("stratus-ccm", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signalContext()
	defer stop()
	logger := klog.NewKlogr()
	ctrl.SetLogger(logger)
	if err := manager.Run(log.IntoContext(ctx, logger), o); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
	os.Exit(0)
}

// Process is a manager in a child process (the test binary re-executed).
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	out  *testsupport.LockedBuffer
}

// StartProcess starts the manager with args in a child process, which the
// package's TestMain must hand to RunHelperProcess. The process is killed at the
// end of the test if still running.
func StartProcess(t testing.TB, args ...string) *Process {
	t.Helper()
	return startChild(t, helperEnv, "manager", args)
}

// StartCommand runs the stratus-ccm command line args (a subcommand such as
// `plugin serve ...`) in a child process, like StartProcess, with the
// providers the test binary links in.
func StartCommand(t testing.TB, args ...string) *Process {
	t.Helper()
	return startChild(t, commandEnv, "stratus-ccm "+strings.Join(args[:min(len(args), 2)], " "), args)
}

// startChild re-executes the test binary with args in env; what names the
// child in the output logged when the test fails.
func startChild(t testing.TB, env, what string, args []string) *Process {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
	out := &testsupport.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{cmd: cmd, done: make(chan struct{}), out: out}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("%s process output:\n%s", what, out.String())
		}
	})
	return p
}

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Wait waits up to timeout for the process to exit and returns its exit error.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return errors.New("manager process still running")
	}
}

// Output is what the process logged so far.
func (p *Process) Output() string { return p.out.String() }

// HTTPSClient is a client for the manager's self-signed secure port.
func HTTPSClient() *http.Client {
	return &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true, TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // self-signed test server
	}
}

// Get requests url with an optional bearer token and returns the status code
// and body.
func Get(ctx context.Context, url, token string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := HTTPSClient().Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
