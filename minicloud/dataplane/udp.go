package dataplane

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// udpListener receives datagrams on a VIP port. Each client address gets a
// session: a socket connected to one backend, chosen when the session
// starts, whose replies are sent back to the client from the VIP.
type udpListener struct {
	pc *net.UDPConn
	wg sync.WaitGroup

	mu       sync.Mutex
	sessions map[netip.AddrPort]*udpSession
	closed   bool
}

type udpSession struct {
	upstream *net.UDPConn
	mu       sync.Mutex
	last     time.Time
}

func (s *udpSession) touch() {
	s.mu.Lock()
	s.last = time.Now()
	s.mu.Unlock()
}

func (s *udpSession) idleFor() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Since(s.last)
}

func (p *Plane) listenUDP(b *balancer, k listenerKey, addr string, log logr.Logger) (closer, error) {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	pc, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	l := &udpListener{pc: pc, sessions: map[netip.AddrPort]*udpSession{}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		buf := make([]byte, 64*1024)
		for {
			n, src, err := pc.ReadFromUDPAddrPort(buf)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					log.Error(err, "read failed; listener stops")
				}
				return
			}
			s := p.udpSession(b, k, l, src, log)
			if s == nil {
				continue
			}
			s.touch()
			if _, err := s.upstream.Write(buf[:n]); err != nil {
				log.V(1).Info("forward datagram failed", "err", err.Error())
			}
		}
	}()
	return l, nil
}

// udpSession returns the session of src, starting one if needed; nil when
// src is not admitted or no backend is eligible.
func (p *Plane) udpSession(b *balancer, k listenerKey, l *udpListener, src netip.AddrPort, log logr.Logger) *udpSession {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.sessions[src]; s != nil {
		return s
	}
	if l.closed {
		return nil
	}
	t := b.table.Load()
	if !t.admits(k, src.Addr()) {
		return nil
	}
	backends := t.pick(k, src.Addr())
	if len(backends) == 0 {
		return nil
	}
	up, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(backends[0]))
	if err != nil {
		log.V(1).Info("dial backend failed", "backend", backends[0].String(), "err", err.Error())
		return nil
	}
	idle := p.opts.UDPIdleTimeout
	if t.idleTimeout > 0 {
		idle = t.idleTimeout
	}
	s := &udpSession{upstream: up, last: time.Now()}
	l.sessions[src] = s
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer func() {
			l.mu.Lock()
			delete(l.sessions, src)
			l.mu.Unlock()
			up.Close()
		}()
		buf := make([]byte, 64*1024)
		for {
			up.SetReadDeadline(time.Now().Add(idle))
			n, err := up.Read(buf)
			if err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() && s.idleFor() < idle {
					continue
				}
				if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, net.ErrClosed) {
					return
				}
				// ICMP port unreachable and the like: keep the session
				// until it idles out, as a NAT would.
				if s.idleFor() >= idle {
					return
				}
				continue
			}
			s.touch()
			if _, err := l.pc.WriteToUDPAddrPort(buf[:n], src); err != nil && errors.Is(err, net.ErrClosed) {
				return
			}
		}
	}()
	return s
}

// Close closes the socket and every session and waits for their goroutines.
func (l *udpListener) Close() {
	l.pc.Close()
	l.mu.Lock()
	l.closed = true
	for _, s := range l.sessions {
		s.upstream.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}
