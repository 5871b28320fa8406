package dataplane

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
)

// proxySignature starts every PROXY protocol v2 header.
var proxySignature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// proxyHeader is the PROXY protocol v2 header of a TCP connection from src
// to dst: version 2, command PROXY, TCP over IPv4 (or IPv6 when either
// address is IPv6), the addresses and the ports.
func proxyHeader(src, dst netip.AddrPort) []byte {
	sa, da := src.Addr().Unmap(), dst.Addr().Unmap()
	family := byte(0x11) // AF_INET, STREAM
	if !sa.Is4() || !da.Is4() {
		family = 0x21 // AF_INET6, STREAM
		sa, da = netip.AddrFrom16(sa.As16()), netip.AddrFrom16(da.As16())
	}
	addrs := append(sa.AsSlice(), da.AsSlice()...)
	addrs = binary.BigEndian.AppendUint16(addrs, src.Port())
	addrs = binary.BigEndian.AppendUint16(addrs, dst.Port())
	h := append([]byte{}, proxySignature...)
	h = append(h, 0x21, family) // version 2, PROXY
	h = binary.BigEndian.AppendUint16(h, uint16(len(addrs)))
	return append(h, addrs...)
}

// ReadProxyHeader reads a PROXY protocol v2 header of a TCP connection
// (command PROXY, family TCP over IPv4 or IPv6) from r and returns the
// source address and port it carries. Anything else is an error: a
// connection that does not start with the header, another version, a
// LOCAL command, a truncated header.
func ReadProxyHeader(r io.Reader) (string, error) {
	var fixed [16]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return "", fmt.Errorf("PROXY header: %w", err)
	}
	if string(fixed[:12]) != string(proxySignature) {
		return "", fmt.Errorf("PROXY header: no v2 signature in %q", fixed[:12])
	}
	if fixed[12] != 0x21 {
		return "", fmt.Errorf("PROXY header: version/command byte %#x, want 0x21 (v2, PROXY)", fixed[12])
	}
	body := make([]byte, binary.BigEndian.Uint16(fixed[14:16]))
	if _, err := io.ReadFull(r, body); err != nil {
		return "", fmt.Errorf("PROXY header: addresses: %w", err)
	}
	var n int
	switch fixed[13] {
	case 0x11: // TCP over IPv4
		n = 4
	case 0x21: // TCP over IPv6
		n = 16
	default:
		return "", fmt.Errorf("PROXY header: family/protocol byte %#x, want TCP over IPv4 or IPv6", fixed[13])
	}
	if len(body) < 2*n+4 {
		return "", fmt.Errorf("PROXY header: %d bytes of addresses, want at least %d", len(body), 2*n+4)
	}
	src, _ := netip.AddrFromSlice(body[:n])
	port := binary.BigEndian.Uint16(body[2*n : 2*n+2])
	return netip.AddrPortFrom(src.Unmap(), port).String(), nil
}
