package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/stratus-ccm/stratus/internal/dev/devenv"
)

// TunedFlags are the flags of the "tuned" mode, for both managers (both
// accept them).
var TunedFlags = []string{"--kube-api-qps=200", "--kube-api-burst=400", "--concurrent-service-syncs=10", "--concurrent-node-syncs=10"}

// managerFlags are the flags o's mode gives both managers: none in
// "defaults" (each manager's own), TunedFlags in "tuned", otherwise
// o's --kube-api-qps/burst.
func managerFlags(o Options) []string {
	switch o.Mode {
	case ModeDefaults:
		return nil
	case ModeTuned:
		return TunedFlags
	}
	return []string{"--kube-api-qps=" + strconv.Itoa(o.KubeAPIQPS), "--kube-api-burst=" + strconv.Itoa(o.KubeAPIBurst)}
}

// runOne runs scenario sc for manager m on a fresh environment. It returns
// the metrics and, when the scenario took one (Options.HeapProfileDir), the
// summary of the manager's heap profile.
func runOne(ctx context.Context, o Options, sc scenario, m manager) (Metrics, string, error) {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	dir, err := os.MkdirTemp(o.WorkDir, sc.name+"-"+string(m)+"-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(dir)

	ports, err := devenv.FreePorts()
	if err != nil {
		return nil, "", err
	}
	audit, auditLog, err := auditArgs(filepath.Join(dir, "audit"))
	if err != nil {
		return nil, "", err
	}
	cp := &devenv.ControlPlane{Dir: filepath.Join(dir, "cluster"), BinDir: o.BinDir, Ports: ports, APIServerArgs: audit}
	if err := cp.Start(ctx); err != nil {
		return nil, "", fmt.Errorf("control plane: %w", err)
	}
	defer cp.Stop(context.WithoutCancel(ctx))
	cfg, err := cp.RESTConfig()
	if err != nil {
		return nil, "", err
	}
	cfg.QPS, cfg.Burst = 500, 1000 // the harness, not the manager under test
	cfg.UserAgent = harnessAgent
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, "", err
	}

	var (
		e         *env
		cloudArgs []string
		bin       string
	)
	switch sc.cloud {
	case vsphereCloud:
		var stop func()
		if e, cloudArgs, stop, err = startVSphere(ctx, dir, o, sc); err != nil {
			return nil, "", err
		}
		defer stop()
		e.kube = kube
		bin = filepath.Join(o.BinDir, "vsphere-ccm")
	case openstackCloud:
		var stop func()
		if e, cloudArgs, stop, err = startOpenStack(ctx, dir, o); err != nil {
			return nil, "", err
		}
		defer stop()
		e.kube = kube
		bin = filepath.Join(o.BinDir, "openstack-ccm")
	default:
		var stop func()
		if e, cloudArgs, stop, err = startMinicloud(ctx, dir, o); err != nil {
			return nil, "", err
		}
		defer stop()
		e.kube = kube
		bin = filepath.Join(o.BinDir, "ccm")
	}
	e.auditLog, e.countsSince, e.audit = auditLog, time.Now(), &auditTail{path: auditLog}
	if err := sc.setup(ctx, e, o.Sizes); err != nil {
		return nil, "", fmt.Errorf("setup: %w", err)
	}
	if m != upstream {
		bin = o.StratusCCM
		if sc.stratusCloudConfig != "" {
			if cloudArgs, err = extendCloudConfig(cloudArgs, filepath.Join(dir, "stratus-cloud.yaml"), sc.stratusCloudConfig); err != nil {
				return nil, "", err
			}
		}
	}
	if m == stratusPlugin {
		var stop func()
		if cloudArgs, stop, err = startPlugin(ctx, o, sc.name, cloudArgs); err != nil {
			return nil, "", err
		}
		defer stop()
	}
	// Without a profile to take, neither manager serves anything: their
	// health and metrics endpoints are not what is measured.
	serving := []string{"--secure-port=0"}
	if o.HeapProfileDir != "" && sc.heapProfile {
		if e.profiler, serving, err = newProfiler(ctx, kube, o.HeapProfileDir, filepath.Join(dir, "certs")); err != nil {
			return nil, "", fmt.Errorf("heap profile: %w", err)
		}
		e.profileName = sc.name + "-" + string(m)
	}
	kc := cp.KubeconfigPath()
	mkc := filepath.Join(dir, "manager.kubeconfig")
	if err := managerKubeconfig(ctx, cp, kube, mkc); err != nil {
		return nil, "", err
	}
	cmd := exec.CommandContext(ctx, bin, append(cloudArgs,
		"--kubeconfig="+mkc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--leader-elect=false", "--use-service-account-credentials=false",
		"--configure-cloud-routes=false", "--cluster-name=bench")...)
	cmd.Args = append(cmd.Args, serving...)
	cmd.Args = append(cmd.Args, managerFlags(o)...)
	logFile, err := os.Create(filepath.Join(o.WorkDir, sc.name+"-"+string(m)+".log"))
	if err != nil {
		return nil, "", err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The manager dies with the harness, whatever kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", m, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	e.mgr = cmd

	type outcome struct {
		m   Metrics
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		met, err := sc.measure(ctx, e, o.Sizes)
		done <- outcome{met, err}
	}()
	select {
	case out := <-done:
		return out.m, e.heapTop, out.err
	case err := <-exited:
		cancel()
		<-done
		return nil, "", fmt.Errorf("%s exited early: %v (log: %s)", m, err, logFile.Name())
	}
}

// extendCloudConfig writes the cloud config args name, with extra lines
// appended, to path, and returns args naming path instead.
func extendCloudConfig(args []string, path, extra string) ([]string, error) {
	out := slices.Clone(args)
	for i, a := range out {
		orig, ok := strings.CutPrefix(a, "--cloud-config=")
		if !ok {
			continue
		}
		raw, err := os.ReadFile(orig)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(path, append(raw, extra...), 0o600); err != nil {
			return nil, err
		}
		out[i] = "--cloud-config=" + path
		return out, nil
	}
	return nil, fmt.Errorf("no --cloud-config among %v to extend", args)
}
