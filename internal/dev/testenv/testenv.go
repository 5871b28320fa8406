// Package testenv runs a real etcd and kube-apiserver for the tests of one package.
//
// The binaries come from hack/kubebins (make kubebins) and are started through
// controller-runtime's envtest, once per test binary, from TestMain:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
//
//	func TestSomething(t *testing.T) {
//		env := testenv.Get(t)
//		client := env.Clientset(t)
//		...
//	}
//
// The API server enforces RBAC. Env.Config is an administrator (system:masters);
// Env.UserConfig and Env.ServiceAccountConfig mint identities without privileges,
// so that tests can prove least privilege.
//
// Under `go test -short` the control plane is not started and Get skips the test.
// Without -short, missing binaries fail the whole package with a message naming the
// command that builds them. A watchdog process removes the control plane's
// processes and temporary files if the test binary dies without cleaning up
// (panic, timeout, signal).
package testenv

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratus-ccm/stratus/internal/dev/repo"
	"github.com/stratus-ccm/stratus/internal/dev/testsupport"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// BuildCommand is how a developer builds the control-plane binaries.
const BuildCommand = "make kubebins"

// Env is a running control plane.
type Env struct {
	// Config authenticates as an administrator (group system:masters).
	Config *rest.Config
	// BinDir holds the etcd, kube-apiserver and kubectl binaries in use.
	BinDir string

	env  *envtest.Environment
	root string // temporary files of etcd and kube-apiserver
}

// current is the control plane Main started for this test binary.
var current *Env

// Main starts the control plane, runs the tests and stops it again; it never
// returns. Call it from TestMain.
func Main(m *testing.M) {
	os.Exit(run(m, nil))
}

// MainWith is Main with extra kube-apiserver flags (name without dashes →
// value), such as a Service IP range wider than envtest's /24 for a test
// of hundreds of Services.
func MainWith(m *testing.M, apiServerFlags map[string]string) {
	os.Exit(run(m, apiServerFlags))
}

func run(m *testing.M, apiServerFlags map[string]string) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	env, err := StartWith(apiServerFlags)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testenv: %v\n", err)
		return 1
	}
	current = env
	defer env.Stop()

	// Ctrl-C or SIGTERM: stop the control plane before dying.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		env.Stop()
		fmt.Fprintf(os.Stderr, "testenv: stopped control plane on %v\n", s)
		os.Exit(1)
	}()
	defer signal.Stop(sigs)
	return m.Run()
}

// Get returns the package's control plane. Under -short it skips the test; if the
// control plane is not running (TestMain does not call Main) it fails the test.
func Get(t testing.TB) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane; skipped under -short")
	}
	if current == nil {
		t.Fatal("no control plane: the package's TestMain must call testenv.Main(m)")
	}
	return current
}

// Start starts etcd and kube-apiserver. Most tests use Main and Get instead.
func Start() (*Env, error) { return StartWith(nil) }

// StartWith is Start with extra kube-apiserver flags (see MainWith).
func StartWith(apiServerFlags map[string]string) (*Env, error) {
	binDir, err := BinDir()
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(binDir, name)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s not found in %s: run `%s` first", name, binDir, BuildCommand)
		}
	}
	root, err := os.MkdirTemp("", "stratus-testenv-")
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    binDir,
		ControlPlaneStartTimeout: 90 * time.Second,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	etcd := &envtest.Etcd{DataDir: filepath.Join(root, "etcd")}
	etcd.Configure().Set("unsafe-no-fsync", "true")
	env.ControlPlane.Etcd = etcd
	api := env.ControlPlane.GetAPIServer()
	api.CertDir = filepath.Join(root, "certs")
	for name, value := range apiServerFlags {
		api.Configure().Set(name, value)
	}
	for _, d := range []string{etcd.DataDir, api.CertDir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		_ = os.RemoveAll(root)
		return nil, fmt.Errorf("start control plane from %s: %w", binDir, err)
	}
	startWatchdog(root)
	cfg.QPS, cfg.Burst = 200, 400
	return &Env{Config: cfg, BinDir: binDir, env: env, root: root}, nil
}

// Stop stops the control plane and removes its files. It is safe to call twice.
func (e *Env) Stop() {
	if e.env == nil {
		return
	}
	env := e.env
	e.env = nil
	_ = env.Stop()
	_ = os.RemoveAll(e.root)
}

// Clientset returns an administrator clientset.
func (e *Env) Clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	return mustClientset(t, e.Config)
}

// UserConfig returns a config that authenticates as the named user (by client
// certificate) with the given groups and no other privileges.
func (e *Env) UserConfig(t testing.TB, name string, groups ...string) *rest.Config {
	t.Helper()
	u, err := e.env.AddUser(envtest.User{Name: name, Groups: groups}, e.Config)
	if err != nil {
		t.Fatalf("add user %s: %v", name, err)
	}
	cfg := u.Config()
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	return cfg
}

// ServiceAccountConfig creates the ServiceAccount namespace/name if needed and
// returns a config that authenticates with a real token issued for it (the same
// kind of credential a pod gets), valid for an hour.
func (e *Env) ServiceAccountConfig(t testing.TB, namespace, name string) *rest.Config {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := e.Clientset(t)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if _, err := cs.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create service account %s/%s: %v", namespace, name, err)
	}
	seconds := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create token for %s/%s: %v", namespace, name, err)
	}
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = tr.Status.Token
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	return cfg
}

// Namespace creates a namespace with a unique name for the test and deletes it when
// the test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	cs := e.Clientset(t)
	ns, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

func mustClientset(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("clientset: %v", err)
	}
	return cs
}

// BinDir returns the folder with the control-plane binaries: $KUBEBUILDER_ASSETS if
// set, otherwise .cache/kubebins/<version> in the repository.
func BinDir() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	version, err := pinnedVersion(filepath.Join(root, "hack", "kubebins", "versions.env"), "K8S_VERSION")
	if err != nil {
		return "", err
	}
	return filepath.Join(root, ".cache", "kubebins", version), nil
}

// RepoRoot finds the repository root (the folder holding the stratus go.mod) from
// the working directory, which `go test` sets to the package folder.
func RepoRoot() (string, error) {
	root, err := repo.Root()
	if err != nil {
		return "", fmt.Errorf("%w; set KUBEBUILDER_ASSETS", err)
	}
	return root, nil
}

func pinnedVersion(path, key string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), key+"="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s not set in %s", key, path)
}

// startWatchdog starts a small process, in its own process group so that a Ctrl-C
// does not reach it, that waits for this test binary to exit and then kills the
// control-plane processes and removes root. After a clean Stop it finds nothing to
// do.
func startWatchdog(root string) {
	var pids []string
	for _, pid := range testsupport.Children(os.Getpid()) {
		pids = append(pids, strconv.Itoa(pid))
	}
	script := `while kill -0 "$1" 2>/dev/null; do sleep 1; done; shift; root=$1; shift
for p in "$@"; do kill -9 "$p" 2>/dev/null; done; rm -rf "$root"`
	args := append([]string{"-c", script, "watchdog", strconv.Itoa(os.Getpid()), root}, pids...)
	cmd := exec.Command("/bin/sh", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "testenv: no watchdog (%v); an aborted run may leave processes behind\n", err)
		return
	}
	go func() { _ = cmd.Wait() }()
}

// Kubebin returns the path of a binary hack/kubebins builds (in
// $KUBEBUILDER_ASSETS or .cache/kubebins), or an error naming the make
// target that builds it.
func Kubebin(name, makeTarget string) (string, error) {
	dir, err := BinDir()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", name, err)
	}
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("%s not found in %s: run `make %s` first", name, dir, makeTarget)
	}
	return bin, nil
}
