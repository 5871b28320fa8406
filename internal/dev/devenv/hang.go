package devenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// tarpit accepts connections on an address and never answers: a server
// whose process is wedged, as a hung vCenter or cloud API is. It reads and
// discards what clients send, so a client is never blocked writing, and
// closes a connection once its client has closed it: connections pile up
// here only if clients never give up.
type tarpit struct {
	ln    net.Listener
	done  chan struct{}
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// listenTarpit starts a tarpit on addr.
func listenTarpit(addr string) (*tarpit, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("hang on %s: %w", addr, err)
	}
	t := &tarpit{ln: ln, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	go t.accept()
	return t, nil
}

func (t *tarpit) accept() {
	defer close(t.done)
	for {
		c, err := t.ln.Accept()
		if err != nil {
			return
		}
		t.mu.Lock()
		t.conns[c] = struct{}{}
		t.mu.Unlock()
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			_, _ = io.Copy(io.Discard, c)
			c.Close()
			t.mu.Lock()
			delete(t.conns, c)
			t.mu.Unlock()
		}()
	}
}

// open is the number of connections clients still hold open.
func (t *tarpit) open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.conns)
}

// close stops accepting, closes every held connection and waits for the
// tarpit's goroutines.
func (t *tarpit) close() {
	t.ln.Close()
	<-t.done
	t.mu.Lock()
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// ErrHanging is the error of hang on a drill target that already hangs.
var ErrHanging = errors.New("already hanging")

// hangable gives a drill target the hang fault: hang stops the target and
// puts a tarpit on its address, so clients connect and wait for answers
// that never come; start (or stop) ends the hang first.
type hangable struct {
	drillTarget
	mu  sync.Mutex
	pit *tarpit
}

func newHangable(t drillTarget) *hangable { return &hangable{drillTarget: t} }

// hang stops the target if it runs and holds its address.
func (h *hangable) hang() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.pit != nil {
		return fmt.Errorf("%s: %w", h.name, ErrHanging)
	}
	if h.drillTarget.running() {
		if err := h.drillTarget.stop(); err != nil {
			return err
		}
	}
	pit, err := listenTarpit(h.addr)
	if err != nil {
		return err
	}
	h.pit = pit
	return nil
}

// endHang closes the tarpit, if any; h.mu is held.
func (h *hangable) endHang() bool {
	if h.pit == nil {
		return false
	}
	h.pit.close()
	h.pit = nil
	return true
}

// start ends a hang and starts the target.
func (h *hangable) start() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endHang()
	return h.drillTarget.start()
}

// stop ends a hang (the address then refuses connections) or stops the
// target.
func (h *hangable) stop() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.endHang() {
		return nil
	}
	return h.drillTarget.stop()
}

// state describes the target for status.
func (h *hangable) state() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.pit != nil:
		return fmt.Sprintf("hanging on %s (accepts connections, never answers; %d open)", h.addr, h.pit.open())
	case h.drillTarget.running():
		return "running on " + h.addr
	}
	return "stopped"
}

// hanging reports whether the target hangs.
func (h *hangable) hanging() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pit != nil
}
