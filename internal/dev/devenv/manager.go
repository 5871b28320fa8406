package devenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// managerArgs are the flags of stratus-ccm in the dev environment.
//
// With --cloud vsphere the providers are in the --config file (vsphere for
// nodes, minicloud for load balancers) and no provider programs routes:
// the VMs are not minicloud instances, which minicloud's routes point at.
// With --cloud openstack the openstack provider reads <state-dir>/cloud.conf
// and does nodes, load balancers and routes (the dialect's router).
func (e *env) managerArgs() []string {
	args := []string{"--kubeconfig=" + e.cp.KubeconfigPath()}
	switch {
	case e.vsphere():
		args = append(args, "--config="+e.managerConfigPath(), "--configure-cloud-routes=false")
	case e.openstack():
		args = append(args,
			"--cloud-provider=openstack",
			"--cloud-config="+e.openstackConfigPath(),
			"--config="+e.managerConfigPath(),
			"--configure-cloud-routes=true",
			"--route-reconciliation-period=5s",
		)
	default:
		args = append(args,
			"--cloud-provider=minicloud",
			"--cloud-config="+e.cloudConfigPath(),
			"--config="+e.managerConfigPath(),
			"--configure-cloud-routes=true",
			"--route-reconciliation-period=5s",
		)
	}
	return append(args,
		"--cluster-name="+ClusterName,
		"--cluster-cidr="+e.clusterCIDR(),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(e.ports.Manager),
		"--node-monitor-period=5s",
		// A deleted instance's node goes soon after it is NotReady (the
		// default 1m is for real clusters); keeps the demo snappy.
		"--node-deletion-grace-period="+NodeDeletionGracePeriod.String(),
	)
}

// clusterCIDR is the pod network: the real nodes' own, else ClusterCIDR.
func (e *env) clusterCIDR() string {
	if e.real != nil {
		return e.real.net.podNet.String()
	}
	return ClusterCIDR
}

func (e *env) cloudConfigPath() string { return filepath.Join(e.opts.StateDir, "minicloud.yaml") }

func (e *env) managerConfigPath() string { return filepath.Join(e.opts.StateDir, "stratus-ccm.yaml") }

// managerConfig relaxes the node deletion budget (by default one deletion
// per 10 minutes in a small cluster), so deleting several instances in a
// row removes their nodes, as a newcomer trying things expects.
const managerConfig = `apiVersion: stratus.io/v1alpha1
kind: ManagerConfig
nodeLifecycle:
  deletionBudgetPercent: 100
  deletionBudgetMin: 100
  deletionBudgetWindow: 1m
`

// hybridProviders is the providers part of the manager's config with
// --cloud vsphere: the VMs' nodes from vsphere, load balancers from
// minicloud, no routes provider.
const hybridProviders = `providers:
- name: vsphere
  type: vsphere
  cloudConfigFile: %s
- name: minicloud
  type: minicloud
  cloudConfigFile: %s
defaultNodeProvider: vsphere
defaultLoadBalancerProvider: minicloud
`

// writeCloudConfig writes the minicloud provider's cloud-config (where
// minicloud is and the file holding its token, never the token itself) and
// the manager's config file. (--cloud openstack's cloud.conf is written by
// writeOpenStackConfig, from the running cloud.)
func (e *env) writeCloudConfig() error {
	body := fmt.Sprintf("url: %s\ntokenFile: %s\n", e.cloud.url, e.cloud.tokenFile)
	config := managerConfig
	if e.vsphere() {
		// The vSphere nodes are no minicloud instances: load balancers
		// send their traffic to the nodes' InternalIPs.
		body += "foreignNodes: internalIP\n"
		config += fmt.Sprintf(hybridProviders, e.vsphereConfigPath(), e.cloudConfigPath())
	}
	if err := os.WriteFile(e.cloudConfigPath(), []byte(body), 0o644); err != nil {
		return fmt.Errorf("write cloud-config: %w", err)
	}
	if err := os.WriteFile(e.managerConfigPath(), []byte(config), 0o644); err != nil {
		return fmt.Errorf("write manager config: %w", err)
	}
	return nil
}

func (e *env) writeManagerArgs() error {
	if err := e.writeCloudConfig(); err != nil {
		return err
	}
	path := filepath.Join(e.opts.StateDir, "manager.args")
	if err := os.WriteFile(path, []byte(strings.Join(e.managerArgs(), "\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	e.say("manager not started (--no-manager); run: stratus-ccm $(cat %s)", path)
	return nil
}

func (e *env) startManager(ctx context.Context) (*process, error) {
	bin, err := e.managerBinary(ctx)
	if err != nil {
		return nil, err
	}
	if err := e.writeCloudConfig(); err != nil {
		return nil, err
	}
	e.managerBin = bin
	e.say("starting stratus-ccm (%s)", bin)
	p, err := e.launchManager()
	if err != nil {
		return nil, err
	}
	logPath := e.managerLog()
	// Serving its health endpoint means its flags and configuration were
	// accepted (it validates them before serving).
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed serving cert; /healthz only
	if err := waitHTTP(ctx, p, hc, "https://127.0.0.1:"+strconv.Itoa(e.ports.Manager)+"/healthz", "stratus-ccm"); err != nil {
		p.stop(context.WithoutCancel(ctx), stopGrace)
		return nil, fmt.Errorf("%w\n%s", err, tailFile(logPath, 5))
	}
	return p, nil
}

func (e *env) managerLog() string { return filepath.Join(e.cp.LogDir(), "stratus-ccm.log") }

// launchManager starts the manager binary startManager found; its output
// is appended to logs/stratus-ccm.log.
func (e *env) launchManager() (*process, error) {
	env := []string{"MINICLOUD_URL=" + e.cloud.url, "MINICLOUD_TOKEN_FILE=" + e.cloud.tokenFile}
	return startProcess("stratus-ccm", e.managerBin, e.managerArgs(), env, e.managerLog())
}

// tailFile returns the last n lines of a log, indented, for error messages.
func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "  " + path + ":\n    " + strings.Join(lines, "\n    ")
}
