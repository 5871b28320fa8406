// Package plugindriver runs the provider of a conformance Target as a
// plugin (package pkg/plugin, docs/plugins.md), so that the kit checks it
// through the provider protocol, as stratus-ccm uses a provider of type
// "plugin": served in this process by plugin.Serve (Serve), or by a command
// such as `stratus-ccm plugin serve` in a child process (Exec), which is how
// an upstream provider compiled into a build of its own is checked
// unchanged. The cloud is operated by the Target's own driver.
package plugindriver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/controller-manager/pkg/clientbuilder"
	"k8s.io/klog/v2"

	"github.com/stratus-ccm/stratus/pkg/conformance"
	"github.com/stratus-ccm/stratus/pkg/plugin"
)

// readyTimeout bounds how long a plugin may take to create its socket.
const readyTimeout = time.Minute

// stopTimeout bounds how long a plugin process may take to exit after
// SIGTERM before it is killed.
const stopTimeout = 15 * time.Second

// Serve serves t's provider (built from t.Provider and t.CloudConfig) with
// plugin.Serve in this process on a Unix socket, its Initialize getting
// kube, and returns the Target of the manager's side: provider type
// "plugin" with a plugin block naming the socket, and t's driver.
// Closing it stops the plugin, then closes t; on an error t is closed.
func Serve(ctx context.Context, t *conformance.Target, kube *rest.Config) (_ *conformance.Target, err error) {
	defer closeOnError(t, &err)
	p, err := cloudprovider.GetCloudProvider(t.Provider, bytes.NewReader(t.CloudConfig))
	if err != nil {
		return nil, fmt.Errorf("plugin of %s: build the provider: %w", t.Provider, err)
	}
	if p == nil {
		return nil, fmt.Errorf("plugin of %s: no provider is registered under that name", t.Provider)
	}
	dir, sock, err := socketDir()
	if err != nil {
		return nil, fmt.Errorf("plugin of %s: %w", t.Provider, err)
	}
	opts := plugin.ServeOptions{Address: "unix://" + sock, ProviderName: t.Provider}
	if kube != nil {
		opts.ClientBuilder = clientbuilder.SimpleControllerClientBuilder{ClientConfig: kube}
	}
	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- plugin.Serve(sctx, p, opts) }()
	stop := func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	}
	if err := waitSocket(ctx, sock, func() error {
		select {
		case err := <-done:
			done <- err
			return fmt.Errorf("plugin.Serve returned: %v", err)
		default:
			return nil
		}
	}); err != nil {
		stop()
		return nil, fmt.Errorf("plugin of %s: %w", t.Provider, err)
	}
	return wrap(t, sock, stop), nil
}

// Exec runs command (a binary and its first arguments, e.g. stratus-ccm
// and "plugin", "serve") in a child process with --provider, --cloud-config,
// --socket and, when kube is set, --kubeconfig, and returns the Target of
// the manager's side as Serve does. Closing it stops the process (SIGTERM,
// then SIGKILL after 15s), then closes t. The process's output is kept and
// shown in the error when it exits before serving. On an error t is
// closed.
func Exec(ctx context.Context, t *conformance.Target, kube *rest.Config, command ...string) (_ *conformance.Target, err error) {
	defer closeOnError(t, &err)
	if len(command) == 0 {
		return nil, errors.New("plugin: Exec: no command")
	}
	dir, sock, err := socketDir()
	if err != nil {
		return nil, fmt.Errorf("plugin of %s: %w", t.Provider, err)
	}
	cloudConfig := filepath.Join(dir, "cloud-config")
	args := append(command[1:len(command):len(command)], "--provider="+t.Provider, "--cloud-config="+cloudConfig, "--socket="+sock)
	if err := os.WriteFile(cloudConfig, t.CloudConfig, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("plugin of %s: write the cloud config: %w", t.Provider, err)
	}
	if kube != nil {
		kubeconfig := filepath.Join(dir, "kubeconfig")
		if err := conformance.WriteKubeconfig(kube, kubeconfig); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("plugin of %s: %w", t.Provider, err)
		}
		args = append(args, "--kubeconfig="+kubeconfig)
	}
	var out lockedBuffer
	cmd := exec.Command(command[0], args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("plugin of %s: start %s: %w", t.Provider, command[0], err)
	}
	var stopping atomic.Bool
	exited := make(chan struct{})
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		if !stopping.Load() {
			// A plugin that dies under the kit fails the scenarios after
			// it as unavailable; its last words say why.
			klog.ErrorS(waitErr, "Plugin process exited", "provider", t.Provider, "command", strings.Join(cmd.Args, " "), "output", out.String())
		}
		close(exited)
	}()
	stop := func() {
		stopping.Store(true)
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(stopTimeout):
			cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	if err := waitSocket(ctx, sock, func() error {
		select {
		case <-exited:
			return fmt.Errorf("%s exited (%v):\n%s", strings.Join(cmd.Args, " "), waitErr, out.String())
		default:
			return nil
		}
	}); err != nil {
		stop()
		return nil, fmt.Errorf("plugin of %s: %w", t.Provider, err)
	}
	return wrap(t, sock, stop), nil
}

func closeOnError(t *conformance.Target, err *error) {
	if *err != nil && t.Close != nil {
		t.Close()
	}
}

// wrap is the Target of the manager's side of the plugin on sock.
func wrap(t *conformance.Target, sock string, stop func()) *conformance.Target {
	name := t.Name
	if name == "" {
		name = t.Provider
	}
	return &conformance.Target{
		Name:        name + " (plugin)",
		Provider:    plugin.ProviderType,
		CloudConfig: fmt.Appendf(nil, "address: unix://%s\n", sock),
		Driver:      t.Driver,
		Close: func() {
			stop()
			if t.Close != nil {
				t.Close()
			}
		},
	}
}

// socketDir makes a private directory for a plugin's socket (and files).
// It lives under the temporary directory, whose path is short enough for
// a Unix socket name.
func socketDir() (dir, sock string, err error) {
	dir, err = os.MkdirTemp("", "stratus-plugin-")
	if err != nil {
		return "", "", err
	}
	return dir, filepath.Join(dir, "provider.sock"), nil
}

// waitSocket waits until sock exists, failing at once with what exited
// reports when the plugin stopped.
func waitSocket(ctx context.Context, sock string, exited func() error) error {
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, readyTimeout, true, func(context.Context) (bool, error) {
		if err := exited(); err != nil {
			return false, err
		}
		_, err := os.Stat(sock)
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("wait for the socket %s: %w", sock, err)
	}
	return nil
}

// keepOutput is how much of a plugin process's latest output is kept.
const keepOutput = 64 << 10

// lockedBuffer keeps the latest output of a child's stdout and stderr,
// safe for their concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if over := l.b.Len() - keepOutput; over > 0 {
		l.b.Next(over)
	}
	return len(p), nil
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
