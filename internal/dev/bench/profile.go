package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// profilerName names the ServiceAccount, ClusterRole and binding that let
// the harness read a manager's /debug/pprof/.
const profilerName = "stratus-bench-profiler"

// heapTopNodes is how many functions a profile's summary lists.
const heapTopNodes = 15

// profiler reads the heap and CPU profiles of the manager under test from its
// secure port (both managers serve net/http/pprof there with --profiling,
// their default), with a token allowed to get /debug/pprof/*.
type profiler struct {
	// port is the manager's --secure-port, on 127.0.0.1.
	port  int
	token string
	// out is where profiles are written (Options.HeapProfileDir).
	out string
}

// newProfiler grants a ServiceAccount get on /debug/pprof/* and returns the
// profiler with its token, and the serving flags the manager gets instead
// of --secure-port=0: loopback only, a free port, its self-signed
// certificate in certDir.
func newProfiler(ctx context.Context, kube kubernetes.Interface, out, certDir string) (*profiler, []string, error) {
	ns := metav1.NamespaceSystem
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: profilerName, Namespace: ns}}
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("create service account %s/%s: %w", ns, profilerName, err)
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: profilerName},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/debug/pprof", "/debug/pprof/*"}, Verbs: []string{"get"}}},
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("create cluster role %s: %w", profilerName, err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: profilerName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: profilerName},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: profilerName}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		return nil, nil, fmt.Errorf("create cluster role binding %s: %w", profilerName, err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, profilerName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("token for service account %s/%s: %w", ns, profilerName, err)
	}
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	flags := []string{"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port), "--cert-dir=" + certDir}
	return &profiler{port: port, token: tr.Status.Token, out: out}, flags, nil
}

// freePort is a loopback port the kernel reports free right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// heap fetches the manager's heap profile (after a GC, so that it shows
// what is live), writes it to <out>/<name>.heap.pb.gz and returns the
// summary: the functions holding the most in-use memory.
func (p *profiler) heap(ctx context.Context, name string) (string, error) {
	path, err := p.fetch(ctx, "heap?gc=1", name+".heap.pb.gz", time.Minute)
	if err != nil {
		return "", fmt.Errorf("heap profile of %s: %w", name, err)
	}
	return heapTop(ctx, path)
}

// cpu samples the manager's CPU for d (net/http/pprof's profile), writes
// the profile to <out>/<name>.cpu.pb.gz and returns the summary: the
// functions that took the most CPU, with their callees.
func (p *profiler) cpu(ctx context.Context, name string, d time.Duration) (string, error) {
	secs := max(1, int(d.Seconds()))
	path, err := p.fetch(ctx, "profile?seconds="+strconv.Itoa(secs), name+".cpu.pb.gz", d+time.Minute)
	if err != nil {
		return "", fmt.Errorf("CPU profile of %s: %w", name, err)
	}
	return pprofTop(ctx, path, "-cum")
}

// fetch GETs /debug/pprof/<query> from the manager, trying until bound
// passes (the manager may be slow to answer while it is busy), and writes
// the answer to <out>/<file>.
func (p *profiler) fetch(ctx context.Context, query, file string, bound time.Duration) (string, error) {
	// The manager's certificate is self-signed for localhost; the harness
	// talks to its own child on loopback.
	client := &http.Client{Timeout: bound, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/debug/pprof/%s", p.port, query)
	var data []byte
	fctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	var last error
	for data == nil {
		req, err := http.NewRequestWithContext(fctx, http.MethodGet, url, nil)
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+p.token)
		resp, err := client.Do(req)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case rerr != nil:
				err = rerr
			case resp.StatusCode != http.StatusOK:
				err = fmt.Errorf("GET /debug/pprof/%s: %s: %.200s", query, resp.Status, body)
			default:
				data = body
				continue
			}
		}
		last = err
		select {
		case <-fctx.Done():
			return "", last
		case <-time.After(time.Second):
		}
	}
	if err := os.MkdirAll(p.out, 0o755); err != nil {
		return "", fmt.Errorf("profile folder: %w", err)
	}
	path := filepath.Join(p.out, file)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return "", fmt.Errorf("write profile: %w", err)
	}
	return path, nil
}

// heapTop is `go tool pprof -top` of the heap profile at path by in-use
// bytes, without the lines that name the file.
func heapTop(ctx context.Context, path string) (string, error) {
	return pprofTop(ctx, path, "-sample_index=inuse_space")
}

// pprofTop is `go tool pprof -top` of the profile at path with the extra
// arguments, without the lines that name the file.
func pprofTop(ctx context.Context, path string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", append(append([]string{"tool", "pprof", "-top"}, args...), "-nodecount="+strconv.Itoa(heapTopNodes), path)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go tool pprof -top %s: %w: %s", path, err, stderr.String())
	}
	var keep []string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.HasPrefix(line, "File: ") || strings.HasPrefix(line, "Build ID: ") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n"), nil
}
