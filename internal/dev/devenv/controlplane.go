package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Cluster-wide settings of the dev cluster, shared by kube-controller-manager
// (node IPAM) and the manager (routes).
const (
	// ClusterCIDR is the pod network; node IPAM gives each node a /24 of it.
	ClusterCIDR = "10.244.0.0/16"
	// ServiceCIDR is the service cluster IP range.
	ServiceCIDR = "10.96.0.0/16"
	// NodeMonitorGracePeriod is how long kube-controller-manager waits for a
	// heartbeat before it marks a node NotReady (short, for a snappy demo).
	NodeMonitorGracePeriod = 20 * time.Second
)

// Ports are the TCP ports on 127.0.0.1 a dev environment listens on
// (VCenter, the simulated vCenter's, only with --cloud vsphere).
type Ports struct {
	EtcdClient, EtcdPeer, APIServer, ControllerManager, Minicloud, Manager, VCenter int
}

// portCount is the number of fields of Ports: --port-base P uses P..P+portCount-1.
const portCount = 7

// PortsFrom returns the ports base, base+1, ... in field order.
func PortsFrom(base int) Ports {
	return Ports{base, base + 1, base + 2, base + 3, base + 4, base + 5, base + 6}
}

// list returns the ports in field order.
func (p Ports) list() []int {
	return []int{p.EtcdClient, p.EtcdPeer, p.APIServer, p.ControllerManager, p.Minicloud, p.Manager, p.VCenter}
}

// allFree reports whether every port is set and can be listened on now.
func (p Ports) allFree() bool {
	for _, port := range p.list() {
		if port <= 0 {
			return false
		}
	}
	return len(p.busy()) == 0
}

// busy returns the ports that cannot be listened on now.
func (p Ports) busy() []int {
	var out []int
	for _, port := range p.list() {
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			out = append(out, port)
			continue
		}
		l.Close()
	}
	return out
}

// FreePorts returns ports the kernel reports free right now.
func FreePorts() (Ports, error) {
	var ps [portCount]int
	var lns []net.Listener
	defer func() {
		for _, l := range lns {
			l.Close()
		}
	}()
	for i := range ps {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return Ports{}, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, l)
		ps[i] = l.Addr().(*net.TCPAddr).Port
	}
	return Ports{ps[0], ps[1], ps[2], ps[3], ps[4], ps[5], ps[6]}, nil
}

// ControlPlane is etcd, kube-apiserver and kube-controller-manager running as
// child processes, with their data, certificates and logs under Dir.
type ControlPlane struct {
	// Dir holds etcd's data (etcd/), certificates (pki/), kubeconfigs and logs
	// (logs/).
	Dir string
	// BinDir holds the etcd, kube-apiserver and kube-controller-manager binaries.
	BinDir string
	// Ports to listen on.
	Ports Ports
	// ControllerManager starts kube-controller-manager too (default in
	// Options of the dev environment; tests of the kubelet alone skip it).
	ControllerManager bool
	// APIServerArgs are added to kube-apiserver's command line (the
	// benchmark's audit log, for example).
	APIServerArgs []string
	// AdvertiseAddress, if set, is the address the API server advertises
	// (the endpoint of the kubernetes Service): with real nodes, the
	// environment's host address on the node network, where a forwarder
	// carries connections to the loopback port. Its serving certificate
	// names it too.
	AdvertiseAddress string
	// Scheduler starts kube-scheduler too (real pods need one; simulated
	// kubelets run none).
	Scheduler bool
	// ClusterCIDR is the pod network of node IPAM (default ClusterCIDR).
	ClusterCIDR string

	pki   pki
	procs []*process // in start order
}

// KubeconfigPath is the admin kubeconfig (<Dir>/kubeconfig).
func (c *ControlPlane) KubeconfigPath() string { return filepath.Join(c.Dir, "kubeconfig") }

// LogDir is where each component's log file is written.
func (c *ControlPlane) LogDir() string { return filepath.Join(c.Dir, "logs") }

// APIServerURL is the API server's address.
func (c *ControlPlane) APIServerURL() string {
	return "https://127.0.0.1:" + strconv.Itoa(c.Ports.APIServer)
}

// RESTConfig returns an admin client configuration.
func (c *ControlPlane) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.KubeconfigPath())
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", c.KubeconfigPath(), err)
	}
	return cfg, nil
}

// Start generates missing certificates, starts etcd and kube-apiserver, waits
// until the API server is ready, writes the kubeconfigs and, if asked, starts
// kube-controller-manager. On error, whatever started is stopped again.
func (c *ControlPlane) Start(ctx context.Context) (err error) {
	c.pki = pki{dir: filepath.Join(c.Dir, "pki")}
	var servingIPs []net.IP
	if c.AdvertiseAddress != "" {
		servingIPs = append(servingIPs, net.ParseIP(c.AdvertiseAddress))
	}
	if err := c.pki.ensure(servingIPs...); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			c.Stop(context.WithoutCancel(ctx))
		}
	}()
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.startAPIServer(ctx); err != nil {
		return err
	}
	if err := c.writeKubeconfig(c.KubeconfigPath(), "admin"); err != nil {
		return err
	}
	if c.ControllerManager {
		if err := c.startControllerManager(ctx); err != nil {
			return err
		}
	}
	if c.Scheduler {
		return c.startScheduler(ctx)
	}
	return nil
}

func (c *ControlPlane) bin(name string) string { return filepath.Join(c.BinDir, name) }

func (c *ControlPlane) start(name string, args []string) (*process, error) {
	p, err := startProcess(name, c.bin(name), args, nil, filepath.Join(c.LogDir(), name+".log"))
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *ControlPlane) startEtcd(ctx context.Context) error {
	client := "http://127.0.0.1:" + strconv.Itoa(c.Ports.EtcdClient)
	peer := "http://127.0.0.1:" + strconv.Itoa(c.Ports.EtcdPeer)
	p, err := c.start("etcd", []string{
		"--name=stratus-dev",
		"--data-dir=" + filepath.Join(c.Dir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=stratus-dev=" + peer,
		"--unsafe-no-fsync",
		"--log-level=warn",
	})
	if err != nil {
		return err
	}
	return waitHTTP(ctx, p, http.DefaultClient, client+"/health", "etcd")
}

func (c *ControlPlane) startAPIServer(ctx context.Context) error {
	p, err := c.start("kube-apiserver", append([]string{
		"--etcd-servers=http://127.0.0.1:" + strconv.Itoa(c.Ports.EtcdClient),
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.Ports.APIServer),
		"--tls-cert-file=" + c.pki.path(servingCert),
		"--tls-private-key-file=" + c.pki.path(servingKey),
		"--client-ca-file=" + c.pki.path(caCert),
		"--authorization-mode=Node,RBAC",
		"--service-account-key-file=" + c.pki.path(saPub),
		"--service-account-signing-key-file=" + c.pki.path(saKey),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--allow-privileged=true",
		// Kubelets (real ones, for logs and exec) are reached at their
		// InternalIP, never by a name the machine's resolver would look up.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-client-certificate=" + c.pki.path("apiserver-kubelet-client"+clientCertExt),
		"--kubelet-client-key=" + c.pki.path("apiserver-kubelet-client"+clientKeyExt),
	}, append(c.apiServerAdvertise(), c.APIServerArgs...)...))
	if err != nil {
		return err
	}
	hc, err := c.httpClient("admin")
	if err != nil {
		return err
	}
	return waitHTTP(ctx, p, hc, c.APIServerURL()+"/readyz", "kube-apiserver")
}

func (c *ControlPlane) startControllerManager(ctx context.Context) error {
	kc := filepath.Join(c.Dir, "kube-controller-manager.kubeconfig")
	if err := c.writeKubeconfig(kc, "kube-controller-manager"); err != nil {
		return err
	}
	p, err := c.start("kube-controller-manager", []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(c.Ports.ControllerManager),
		"--leader-elect=false",
		"--cloud-provider=external",
		"--allocate-node-cidrs=true",
		"--cluster-cidr=" + c.clusterCIDR(),
		"--node-cidr-mask-size=24",
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--node-monitor-grace-period=" + NodeMonitorGracePeriod.String(),
		"--node-monitor-period=2s",
		"--configure-cloud-routes=false",
		"--service-account-private-key-file=" + c.pki.path(saKey),
		"--root-ca-file=" + c.pki.path(caCert),
		"--use-service-account-credentials=true", // as kubeadm: one identity per controller
	})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed serving cert of KCM; /healthz only
	return waitHTTP(ctx, p, hc, "https://127.0.0.1:"+strconv.Itoa(c.Ports.ControllerManager)+"/healthz", "kube-controller-manager")
}

func (c *ControlPlane) apiServerAdvertise() []string {
	if c.AdvertiseAddress == "" {
		return nil
	}
	return []string{"--advertise-address=" + c.AdvertiseAddress}
}

func (c *ControlPlane) clusterCIDR() string {
	if c.ClusterCIDR != "" {
		return c.ClusterCIDR
	}
	return ClusterCIDR
}

// startScheduler starts kube-scheduler with a client certificate of its own
// (system:kube-scheduler, which the API server's default RBAC serves).
func (c *ControlPlane) startScheduler(ctx context.Context) error {
	kc := filepath.Join(c.Dir, "kube-scheduler.kubeconfig")
	if err := c.WriteClientKubeconfig(kc, "kube-scheduler", schedulerUser, nil, c.APIServerURL(), ""); err != nil {
		return err
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	p, err := c.start("kube-scheduler", []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--leader-elect=false",
	})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed serving cert; /healthz only
	return waitHTTP(ctx, p, hc, "https://127.0.0.1:"+strconv.Itoa(port)+"/healthz", "kube-scheduler")
}

// WriteClientKubeconfig writes a kubeconfig at path for a client
// certificate <name>.crt (created, signed by the environment's CA, unless
// it exists) of user cn in groups orgs, for the API server at server;
// tlsServerName, if set, is the name its certificate is checked for (an
// address the certificate does not name is reached through a forwarder).
func (c *ControlPlane) WriteClientKubeconfig(path, name, cn string, orgs []string, server, tlsServerName string) error {
	if err := c.pki.ensureClient(name, pkix.Name{CommonName: cn, Organization: orgs}); err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stratus-dev"] = &clientcmdapi.Cluster{
		Server:               server,
		CertificateAuthority: c.pki.path(caCert),
		TLSServerName:        tlsServerName,
	}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{
		ClientCertificate: c.pki.path(name + clientCertExt),
		ClientKey:         c.pki.path(name + clientKeyExt),
	}
	cfg.Contexts["stratus-dev"] = &clientcmdapi.Context{Cluster: "stratus-dev", AuthInfo: name}
	cfg.CurrentContext = "stratus-dev"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// CAFile is the environment's CA certificate.
func (c *ControlPlane) CAFile() string { return c.pki.path(caCert) }

// freePort returns a TCP port on 127.0.0.1 that is free now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops the components in reverse order (the API server before etcd, or
// it hangs in shutdown).
func (c *ControlPlane) Stop(ctx context.Context) {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop(ctx, stopGrace)
	}
	c.procs = nil
}

// Pids returns the ids of the running component processes.
func (c *ControlPlane) Pids() []int {
	var out []int
	for _, p := range c.procs {
		out = append(out, p.Pid())
	}
	return out
}

// Exited returns a channel that yields the error of the first component that
// exits on its own.
func (c *ControlPlane) Exited(ctx context.Context) <-chan error {
	ch := make(chan error, 1)
	for _, p := range c.procs {
		go func() {
			select {
			case <-p.exited():
				select {
				case ch <- p.exitErr():
				default:
				}
			case <-ctx.Done():
			}
		}()
	}
	return ch
}

// writeKubeconfig writes a kubeconfig for the client certificate <user>.crt.
func (c *ControlPlane) writeKubeconfig(path, user string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["stratus-dev"] = &clientcmdapi.Cluster{
		Server:               c.APIServerURL(),
		CertificateAuthority: c.pki.path(caCert),
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{
		ClientCertificate: c.pki.path(user + clientCertExt),
		ClientKey:         c.pki.path(user + clientKeyExt),
	}
	cfg.Contexts["stratus-dev"] = &clientcmdapi.Context{Cluster: "stratus-dev", AuthInfo: user}
	cfg.CurrentContext = "stratus-dev"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// httpClient returns an HTTPS client that trusts the dev CA and presents the
// client certificate of user.
func (c *ControlPlane) httpClient(user string) (*http.Client, error) {
	pemCA, err := os.ReadFile(c.pki.path(caCert))
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	pair, err := tls.LoadX509KeyPair(c.pki.path(user+clientCertExt), c.pki.path(user+clientKeyExt))
	if err != nil {
		return nil, fmt.Errorf("load %s client certificate: %w", user, err)
	}
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}},
	}, nil
}

// startTimeout bounds how long a component may take to become healthy.
const startTimeout = 90 * time.Second

// waitHTTP polls url until it answers 200, failing early when the process
// exits (its log usually says why).
func waitHTTP(ctx context.Context, p *process, hc *http.Client, url, what string) error {
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, startTimeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited():
			return false, p.exitErr()
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("wait for %s to become healthy (see its log): %w", what, err)
	}
	return nil
}
