package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/stratus-ccm/stratus/minicloud"
)

// Restart backoff of the manager: a crash loop waits 1s, 2s, 4s, ... up to
// 30s between starts; a manager that ran for managerStableAfter is taken to
// have recovered, and its next crash is restarted after 1s again.
const (
	managerRestartBase = time.Second
	managerRestartMax  = 30 * time.Second
	managerStableAfter = time.Minute
)

// managerSupervisor keeps stratus-ccm running: when it exits while the
// environment runs (a crash, or a fault drill's kill), it says so with the
// exit status and starts it again after a backoff.
type managerSupervisor struct {
	say    func(format string, args ...any)
	start  func() (*process, error)
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	cur *process
}

// superviseManager watches p, the manager started by start, until stop.
func superviseManager(ctx context.Context, p *process, start func() (*process, error), say func(string, ...any)) *managerSupervisor {
	ctx, cancel := context.WithCancel(ctx)
	s := &managerSupervisor{say: say, start: start, cancel: cancel, done: make(chan struct{}), cur: p}
	go s.run(ctx)
	return s
}

func (s *managerSupervisor) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

func (s *managerSupervisor) run(ctx context.Context) {
	defer close(s.done)
	delay := managerRestartBase
	for restarts := 1; ; restarts++ {
		p := s.current()
		started := time.Now()
		select {
		case <-ctx.Done():
			return
		case <-p.exited():
		}
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) >= managerStableAfter {
			delay = managerRestartBase
		}
		s.say("stratus-ccm (pid %d) %s; restarting it in %s (restart %d, log in logs/stratus-ccm.log)", p.Pid(), exitStatus(p), delay, restarts)
		for {
			t := time.NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			delay = min(2*delay, managerRestartMax)
			np, err := s.start()
			if err == nil {
				s.mu.Lock()
				s.cur = np
				s.mu.Unlock()
				s.say("stratus-ccm restarted (pid %d)", np.Pid())
				break
			}
			s.say("stratus-ccm: restart failed: %v; trying again in %s", err, delay)
		}
	}
}

// stop ends the supervision, then stops the running manager.
func (s *managerSupervisor) stop(ctx context.Context, grace time.Duration) {
	s.cancel()
	<-s.done
	s.current().stop(ctx, grace)
}

// exitStatus says how an exited process ended, e.g. "exited: exit status 2"
// or "exited: signal: killed".
func exitStatus(p *process) string {
	if p.err == nil {
		return "exited with status 0"
	}
	return "exited: " + p.err.Error()
}

// cloudServer runs minicloud in this process, and can stop it and start it
// again while the environment runs: its state is in bbolt under the state
// dir, so a restart finds every instance, load balancer and route again.
type cloudServer struct {
	cfg  minicloud.Config
	addr string
	log  logr.Logger
	say  func(format string, args ...any)
	base context.Context // the environment's: a started server stops with it
	// mount, if set, adds handlers to each new server before it serves
	// (the OpenStack dialect).
	mount func(*minicloud.Server) error

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{} // nil while stopped
}

// Errors of cloudServer.start and stop.
var (
	ErrCloudRunning = errors.New("minicloud is already running")
	ErrCloudStopped = errors.New("minicloud is not running")
)

// start opens the state and serves the API on the environment's address.
func (c *cloudServer) start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done != nil {
		return ErrCloudRunning
	}
	srv, err := minicloud.NewServer(c.cfg)
	if err != nil {
		return fmt.Errorf("minicloud: %w", err)
	}
	if c.mount != nil {
		if err := c.mount(srv); err != nil {
			srv.Close()
			return err
		}
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		srv.Close()
		return fmt.Errorf("minicloud: %w", err)
	}
	ctx, cancel := context.WithCancel(c.base)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ctx, ln); err != nil {
			c.log.Error(err, "minicloud stopped")
			c.say("minicloud stopped: %v (start it again: stratus dev minicloud start)", err)
		}
	}()
	c.cancel, c.done = cancel, done
	return nil
}

// stop shuts the API and the data plane down and closes the state.
func (c *cloudServer) stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		return ErrCloudStopped
	}
	c.cancel()
	<-c.done
	c.cancel, c.done = nil, nil
	return nil
}

// running reports whether minicloud serves.
func (c *cloudServer) running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		return false
	}
	select {
	case <-c.done: // Serve failed on its own
		c.cancel()
		c.cancel, c.done = nil, nil
		return false
	default:
		return true
	}
}

// ControlSocket is the name of the Unix socket in the state dir through
// which `stratus dev minicloud|vcsim stop|start|hang|status` reaches a running
// `stratus dev`.
const ControlSocket = "control.sock"

// ControlActions are the actions of Control.
var ControlActions = []string{"stop", "start", "hang", "status"}

// Errors of a drill target that is already in the state asked for.
var (
	ErrVCenterRunning = errors.New("vcsim is already running")
	ErrVCenterStopped = errors.New("vcsim is not running")
)

// controlReply is the JSON answer of the control socket.
type controlReply struct {
	Running bool   `json:"running"`
	Message string `json:"message"`
}

// drillTarget is a part of the environment that the control socket stops
// and starts for fault drills.
type drillTarget struct {
	name, addr  string
	start, stop func() error
	running     func() bool
	// stopped, started and hung are narrated after a stop, a start and
	// a hang.
	stopped, started, hung string
}

// drillTargets are minicloud and, with --cloud vsphere, the simulated
// vCenter.
func (e *env) drillTargets(cloud *cloudServer) []drillTarget {
	targets := []drillTarget{{
		name: "minicloud", addr: cloud.addr, start: cloud.start, stop: cloud.stop, running: cloud.running,
		stopped: "minicloud stopped (stratus dev minicloud stop): its API and load balancers are down; stratus sees the outage; `stratus dev minicloud start` ends it",
		started: "minicloud started again on " + cloud.addr + ", with the state it had",
		hung:    "minicloud hangs (stratus dev minicloud hang): its address accepts connections and never answers, its load balancers are down; stratus's calls time out; `stratus dev minicloud start` ends it",
	}}
	if vc := e.vc; vc != nil {
		targets = append(targets, drillTarget{
			name: "vcsim", addr: vc.Addr(), running: vc.Running,
			start: func() error {
				if vc.Running() {
					return ErrVCenterRunning
				}
				return vc.Start()
			},
			stop: func() error {
				if !vc.Running() {
					return ErrVCenterStopped
				}
				vc.Stop()
				return nil
			},
			stopped: "vcsim stopped (stratus dev vcsim stop): vCenter refuses connections; stratus sees the outage, the VMs keep running; `stratus dev vcsim start` ends it",
			started: "vcsim started again on " + vc.Addr() + ", with the VMs it had",
			hung:    "vcsim hangs (stratus dev vcsim hang): vCenter accepts connections and never answers; stratus's calls time out, the VMs keep running; `stratus dev vcsim start` ends it",
		})
	}
	return targets
}

// serveControl answers the control socket until ctx is done; the returned
// function waits for it to stop.
func (e *env) serveControl(ctx context.Context, cloud *cloudServer) (func(), error) {
	path := filepath.Join(e.opts.StateDir, ControlSocket)
	// The state-dir lock is held: a socket left here is a dead run's.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	mux := http.NewServeMux()
	var hangs []*hangable
	for _, dt := range e.drillTargets(cloud) {
		t := newHangable(dt)
		hangs = append(hangs, t)
		reply := func(w http.ResponseWriter, status int, msg string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(controlReply{Running: t.running() && !t.hanging(), Message: msg})
		}
		mux.HandleFunc("POST /"+t.name+"/hang", func(w http.ResponseWriter, _ *http.Request) {
			if err := t.hang(); err != nil {
				status := http.StatusInternalServerError
				if errors.Is(err, ErrHanging) {
					status = http.StatusConflict
				}
				reply(w, status, err.Error())
				return
			}
			e.say("%s", t.hung)
			reply(w, http.StatusOK, t.name+" hangs on "+t.addr)
		})
		mux.HandleFunc("POST /"+t.name+"/stop", func(w http.ResponseWriter, _ *http.Request) {
			if err := t.stop(); err != nil {
				reply(w, http.StatusConflict, err.Error())
				return
			}
			e.say("%s", t.stopped)
			reply(w, http.StatusOK, t.name+" stopped")
		})
		mux.HandleFunc("POST /"+t.name+"/start", func(w http.ResponseWriter, _ *http.Request) {
			if err := t.start(); err != nil {
				status := http.StatusInternalServerError
				if errors.Is(err, ErrCloudRunning) || errors.Is(err, ErrVCenterRunning) {
					status = http.StatusConflict
				}
				reply(w, status, err.Error())
				return
			}
			e.say("%s", t.started)
			reply(w, http.StatusOK, t.name+" started on "+t.addr)
		})
		mux.HandleFunc("GET /"+t.name, func(w http.ResponseWriter, _ *http.Request) {
			reply(w, http.StatusOK, t.name+" "+t.state())
		})
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return func() {
		<-done
		_ = os.Remove(path)
		for _, h := range hangs {
			h.mu.Lock()
			h.endHang()
			h.mu.Unlock()
		}
	}, nil
}

// Control stops, starts or reports on a part of the `stratus dev` running
// on stateDir: target is "minicloud", or "vcsim" with --cloud vsphere;
// action is one of ControlActions. It returns the answer.
func Control(ctx context.Context, stateDir, target, action string) (string, error) {
	method, path := http.MethodPost, "/"+target+"/"+action
	switch action {
	case "stop", "start", "hang":
	case "status":
		method, path = http.MethodGet, "/"+target
	default:
		return "", fmt.Errorf("%s action %q: want one of %v", target, action, ControlActions)
	}
	sock := filepath.Join(stateDir, ControlSocket)
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	req, err := http.NewRequestWithContext(ctx, method, "http://stratus-dev"+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("no stratus dev running on %s (is it started with this --state-dir?): %w", stateDir, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return "", fmt.Errorf("%s %s: the stratus dev on %s has no %s (vcsim runs with --cloud vsphere only)", target, action, stateDir, target)
	}
	var r controlReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", fmt.Errorf("%s %s: answer of stratus dev (status %d): %w", target, action, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s %s: %s", target, action, r.Message)
	}
	return r.Message, nil
}

// cloudAddr is where minicloud listens.
func (e *env) cloudAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.Minicloud))
}
