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
// which `stratus dev minicloud stop|start|status` reaches a running
// `stratus dev`.
const ControlSocket = "control.sock"

// MinicloudActions are the actions of MinicloudControl.
var MinicloudActions = []string{"stop", "start", "status"}

// controlReply is the JSON answer of the control socket.
type controlReply struct {
	Running bool   `json:"running"`
	Message string `json:"message"`
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
	reply := func(w http.ResponseWriter, status int, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(controlReply{Running: cloud.running(), Message: msg})
	}
	mux.HandleFunc("POST /minicloud/stop", func(w http.ResponseWriter, _ *http.Request) {
		if err := cloud.stop(); err != nil {
			reply(w, http.StatusConflict, err.Error())
			return
		}
		e.say("minicloud stopped (stratus dev minicloud stop): its API and load balancers are down; stratus sees the outage; `stratus dev minicloud start` ends it")
		reply(w, http.StatusOK, "minicloud stopped")
	})
	mux.HandleFunc("POST /minicloud/start", func(w http.ResponseWriter, _ *http.Request) {
		if err := cloud.start(); err != nil {
			status := http.StatusInternalServerError
			if errors.Is(err, ErrCloudRunning) {
				status = http.StatusConflict
			}
			reply(w, status, err.Error())
			return
		}
		e.say("minicloud started again on %s, with the state it had", cloud.addr)
		reply(w, http.StatusOK, "minicloud started on "+cloud.addr)
	})
	mux.HandleFunc("GET /minicloud", func(w http.ResponseWriter, _ *http.Request) {
		state := "stopped"
		if cloud.running() {
			state = "running on " + cloud.addr
		}
		reply(w, http.StatusOK, "minicloud "+state)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	go func() { <-ctx.Done(); _ = srv.Close() }()
	return func() { <-done; _ = os.Remove(path) }, nil
}

// MinicloudControl stops, starts or reports on the minicloud of the
// `stratus dev` running on stateDir (action is one of MinicloudActions),
// and returns its answer.
func MinicloudControl(ctx context.Context, stateDir, action string) (string, error) {
	method, path := http.MethodPost, "/minicloud/"+action
	switch action {
	case "stop", "start":
	case "status":
		method, path = http.MethodGet, "/minicloud"
	default:
		return "", fmt.Errorf("minicloud action %q: want one of %v", action, MinicloudActions)
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
	var r controlReply
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", fmt.Errorf("minicloud %s: answer of stratus dev (status %d): %w", action, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("minicloud %s: %s", action, r.Message)
	}
	return r.Message, nil
}

// cloudAddr is where minicloud listens.
func (e *env) cloudAddr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.Minicloud))
}
