package dataplane

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
)

// tcpListener accepts connections on a VIP port and proxies each to a backend.
type tcpListener struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func (p *Plane) listenTCP(b *balancer, k listenerKey, addr string, log logr.Logger) (closer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	l := &tcpListener{ln: ln, conns: map[net.Conn]struct{}{}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					log.Error(err, "accept failed; listener stops")
				}
				return
			}
			if !l.track(c) {
				c.Close()
				return
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				defer l.untrack(c)
				p.proxyTCP(b, k, l, c, log)
			}()
		}
	}()
	return l, nil
}

func (l *tcpListener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *tcpListener) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
}

// Close stops accepting, closes every proxied connection and waits for the
// goroutines to end.
func (l *tcpListener) Close() {
	l.ln.Close()
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (p *Plane) proxyTCP(b *balancer, k listenerKey, l *tcpListener, client net.Conn, log logr.Logger) {
	defer client.Close()
	t := b.table.Load()
	src, err := netip.ParseAddrPort(client.RemoteAddr().String())
	if err != nil || !t.admits(k, src.Addr()) {
		return
	}
	var backend net.Conn
	for _, ap := range t.pick(k, src.Addr()) {
		d := net.Dialer{Timeout: p.opts.DialTimeout}
		backend, err = d.DialContext(p.ctx, "tcp", ap.String())
		if err == nil {
			break
		}
		log.V(1).Info("backend refused connection", "backend", ap.String(), "err", err.Error())
	}
	if backend == nil {
		return
	}
	// Tracked so that closing the listener also ends the backend side.
	if !l.track(backend) {
		backend.Close()
		return
	}
	defer l.untrack(backend)
	defer backend.Close()
	if t.proxy {
		dst, err := netip.ParseAddrPort(client.LocalAddr().String())
		if err == nil {
			_, err = backend.Write(proxyHeader(src, dst))
		}
		if err != nil {
			log.V(1).Info("send PROXY header failed", "backend", backend.RemoteAddr().String(), "err", err.Error())
			return
		}
	}
	idle := newIdleTimer(t.idleTimeout, client, backend)
	defer idle.stop()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		idle.copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(backend, client)
	go pipe(client, backend)
	<-done
	<-done
}

// idleTimer closes both sides of a proxied connection once no byte has
// passed in either direction for its timeout; with timeout 0 it does nothing
// but copy.
type idleTimer struct {
	timeout time.Duration
	last    atomic.Int64 // unix nanoseconds of the last traffic
	timer   *time.Timer
}

func newIdleTimer(timeout time.Duration, conns ...net.Conn) *idleTimer {
	it := &idleTimer{timeout: timeout}
	if timeout <= 0 {
		return it
	}
	it.last.Store(time.Now().UnixNano())
	check := func() {
		left := time.Until(time.Unix(0, it.last.Load()).Add(timeout))
		if left > 0 {
			it.timer.Reset(left)
			return
		}
		for _, c := range conns {
			c.Close()
		}
	}
	it.timer = time.AfterFunc(timeout, check)
	return it
}

// copy copies src to dst until either fails, noting the traffic.
func (it *idleTimer) copy(dst, src net.Conn) {
	if it.timeout <= 0 {
		io.Copy(dst, src)
		return
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			it.last.Store(time.Now().UnixNano())
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (it *idleTimer) stop() {
	if it.timer != nil {
		it.timer.Stop()
	}
}
