package dataplane

import (
	"encoding/binary"
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
