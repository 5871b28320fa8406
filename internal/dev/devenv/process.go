package devenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// stopGrace is how long a child process gets to exit after SIGTERM before it
// is killed.
const stopGrace = 10 * time.Second

// process is a child process whose output goes to a log file. It runs in its
// own process group (so a terminal's Ctrl-C reaches only stratus dev, which
// then stops its children in order) and dies with this process (Pdeathsig),
// so a crash of stratus dev leaves nothing behind.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done is closed
}

// startProcess starts bin with args, appending its output to logPath.
func startProcess(name, bin string, args []string, env []string, logPath string) (*process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid returns the process id.
func (p *process) Pid() int { return p.cmd.Process.Pid }

// exited returns a channel closed when the process has exited.
func (p *process) exited() <-chan struct{} { return p.done }

// exitErr describes how the process ended; call it after exited is closed.
func (p *process) exitErr() error {
	if p.err == nil {
		return fmt.Errorf("%s exited", p.name)
	}
	return fmt.Errorf("%s exited: %w", p.name, p.err)
}

// stop sends SIGTERM to the process group and waits for the process to exit;
// after grace (or when ctx is done) it kills the group.
func (p *process) stop(ctx context.Context, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	case <-ctx.Done():
	}
	// Kill the whole group even when the leader exited: a child it left
	// behind must not survive stratus dev.
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}
