package minicloud

import (
	"net/netip"
	"strings"
	"testing"
)

func TestPeerNetworks(t *testing.T) {
	for _, tc := range []struct {
		in      string
		wantErr string
		addr    string // translated: want
		want    string
	}{
		{in: "10.0.0.0/16=127.78.0.0/16", addr: "10.0.3.7", want: "127.78.3.7"},
		{in: "10.0.0.0/16=127.78.0.0/16", addr: "10.1.0.1", want: "10.1.0.1"}, // outside: as it is
		{in: " 192.168.1.0/24 = 127.5.5.0/24", addr: "192.168.1.200", want: "127.5.5.200"},
		{in: "fd00:10::/64=::1/128", wantErr: "same family and size"},
		{in: "10.0.0.0/16=127.78.0.0/24", wantErr: "same family and size"},
		{in: "10.0.0.0/16=10.1.0.0/16", wantErr: "loopback"},
		{in: "10.0.0.0/16", wantErr: "NETWORK=VIA"},
		{in: "10.0.0.0/16=nope", wantErr: "nope"},
	} {
		pn, err := ParsePeerNetwork(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParsePeerNetwork(%q) = %v, %v; want an error containing %q", tc.in, pn, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ParsePeerNetwork(%q): %v", tc.in, err)
		}
		got, _ := pn.Translate(netip.MustParseAddr(tc.addr))
		if got.String() != tc.want {
			t.Errorf("%q: Translate(%s) = %s, want %s", tc.in, tc.addr, got, tc.want)
		}
	}
	cfg := DefaultConfig()
	cfg.Tokens = []string{"t"}
	cfg.PeerNetworks = []PeerNetwork{{Network: netip.MustParsePrefix("10.0.0.0/16"), Via: netip.MustParsePrefix("10.9.0.0/16")}}
	if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("validate with a non-loopback via block: %v", err)
	}
}
