package vsphere

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseConfigYAML(t *testing.T) {
	in := `
global:
  user: admin
  password: s3cret
  insecureFlag: true
  datacenters: [dc0]
  soapRoundtripCount: 5
  apiBinding: ":43001"
vcenter:
  east:
    server: vc-east.example.com
    ipFamily: [ipv6, ipv4]
  west:
    server: 10.0.0.5
    port: 8443
    secretName: west-creds
    secretNamespace: kube-system
    datacenters: [dc1, " dc2 "]
    caFile: /etc/vc/ca.pem
labels:
  region: k8s-region
  zone: k8s-zone
nodes:
  internalNetworkSubnetCidr: "10.0.0.0/8, fd00::/8"
  externalVmNetworkName: public
`
	cfg, err := ParseConfig(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	want := []*VCenter{
		{Name: "east", Server: "vc-east.example.com", Port: 443, User: "admin", Password: "s3cret", Datacenters: []string{"dc0"},
			InsecureFlag: true, IPFamilies: []string{IPv6, IPv4}, RoundTripCount: 5},
		{Name: "west", Server: "10.0.0.5", Port: 8443, SecretName: "west-creds", SecretNamespace: "kube-system",
			Datacenters: []string{"dc1", "dc2"}, InsecureFlag: true, CAFile: "/etc/vc/ca.pem", IPFamilies: []string{IPv4}, RoundTripCount: 5},
	}
	if diff := cmp.Diff(want, cfg.VCenters); diff != "" {
		t.Errorf("vCenters (-want +got):\n%s", diff)
	}
	if cfg.Labels != (Labels{Zone: "k8s-zone", Region: "k8s-region"}) {
		t.Errorf("labels = %+v", cfg.Labels)
	}
	if got := ipnets(cfg.Nodes.InternalNetworkSubnets); got != "10.0.0.0/8,fd00::/8" || cfg.Nodes.ExternalVMNetworkName != "public" {
		t.Errorf("nodes = %s %+v", got, cfg.Nodes)
	}
	if s := cfg.String(); strings.Contains(s, "s3cret") || !strings.Contains(s, "<redacted>") {
		t.Errorf("String() = %s", s)
	}
}

func TestParseConfigINI(t *testing.T) {
	in := `
; legacy form
[Global]
user = "admin"
password = "pa;ss#word"   ; comment after a quoted value
port = 443
insecure-flag = 1
datacenters = "dc0, dc1"
ip-family = ipv4,ipv6

[VirtualCenter "10.0.0.1"]

[VirtualCenter "prod"]
server = vc.prod.example.com
secret-name = vc-creds
secret-namespace = kube-system
thumbprint = AA:BB

[Labels]
region = k8s-region
zone = k8s-zone

[Nodes]
internal-vm-network-name = "VM Network"
exclude-internal-network-subnet-cidr = 192.168.0.0/16
`
	cfg, err := ParseConfig(strings.NewReader(in))
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	want := []*VCenter{
		{Name: "10.0.0.1", Server: "10.0.0.1", Port: 443, User: "admin", Password: "pa;ss#word", Datacenters: []string{"dc0", "dc1"},
			InsecureFlag: true, IPFamilies: []string{IPv4, IPv6}, RoundTripCount: DefaultRoundTripCount},
		{Name: "prod", Server: "vc.prod.example.com", Port: 443, SecretName: "vc-creds", SecretNamespace: "kube-system",
			Datacenters: []string{"dc0", "dc1"}, InsecureFlag: true, Thumbprint: "AA:BB", IPFamilies: []string{IPv4, IPv6}, RoundTripCount: DefaultRoundTripCount},
	}
	if diff := cmp.Diff(want, cfg.VCenters); diff != "" {
		t.Errorf("vCenters (-want +got):\n%s", diff)
	}
	if cfg.Labels != (Labels{Zone: "k8s-zone", Region: "k8s-region"}) {
		t.Errorf("labels = %+v", cfg.Labels)
	}
	if cfg.Nodes.InternalVMNetworkName != "VM Network" || ipnets(cfg.Nodes.ExcludeInternalNetworkSubnets) != "192.168.0.0/16" {
		t.Errorf("nodes = %+v", cfg.Nodes)
	}
}

func TestParseConfigGlobalServer(t *testing.T) {
	for _, in := range []string{
		"global:\n  server: vc.example.com\n  user: u\n  password: p\n",
		"[Global]\nserver = vc.example.com\nuser = u\npassword = p\n",
	} {
		cfg, err := ParseConfig(strings.NewReader(in))
		if err != nil {
			t.Fatalf("ParseConfig(%q): %v", in, err)
		}
		if len(cfg.VCenters) != 1 || cfg.VCenters[0].Server != "vc.example.com" || cfg.VCenters[0].User != "u" || cfg.VCenters[0].Port != 443 {
			t.Errorf("ParseConfig(%q) = %s", in, cfg)
		}
	}
}

func TestParseConfigSecretsDirectory(t *testing.T) {
	cfg, err := ParseConfig(strings.NewReader("global:\n  secretsDirectory: /etc/cloud/secrets\nvcenter:\n  a:\n    server: vc\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v := cfg.VCenters[0]; v.SecretsDirectory != "/etc/cloud/secrets" || v.User != "" {
		t.Errorf("vCenter = %+v", v)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"unknown top-level key", "global: {user: u, password: s3cret, server: a}\nextra: 1\n", `extra: unknown key`},
		{"unknown global key", "global:\n  server: a\n  user: u\n  password: s3cret\n  insecure: true\n", `global.insecure: unknown key`},
		{"unknown vcenter key", "vcenter:\n  vc1:\n    server: a\n    user: u\n    password: s3cret\n    datacenter: dc\n", `vcenter.vc1.datacenter: unknown key`},
		{"unknown labels key", "global: {server: a, user: u, password: s3cret}\nlabels:\n  zones: z\n", `labels.zones: unknown key`},
		{"unknown nodes key", "global: {server: a, user: u, password: s3cret}\nnodes:\n  internalNetworkSubnet: 10.0.0.0/8\n", `nodes.internalNetworkSubnet: unknown key`},
		{"nsx-t", "global: {server: a, user: u, password: s3cret}\nnsxt:\n  host: x\n", "nsxt: NSX-T is not supported"},
		{"wrong type", "global:\n  server: a\n  user: u\n  password: s3cret\n  port: https\n", "global.port: wrong type"},
		{"bad port", "global:\n  server: a\n  user: u\n  password: s3cret\n  port: 70000\n", "global.port: 70000 is not a TCP port"},
		{"no vcenter", "global:\n  user: u\n", "no vCenter"},
		{"no server", "vcenter:\n  vc1:\n    user: u\n    password: s3cret\n", "vcenter.vc1.server: required"},
		{"url as server", "global: {server: 'https://vc/sdk', user: u, password: s3cret}\n", "not a URL"},
		{"no user", "global:\n  server: a\n  password: s3cret\n", "vcenter.a: user: required"},
		{"no password", "global:\n  server: a\n  user: u\n", "vcenter.a: password: required"},
		{"half a secret", "global:\n  server: a\n  secretName: s\n", "secretName and secretNamespace: set both"},
		{"half the labels", "global: {server: a, user: u, password: s3cret}\nlabels:\n  zone: z\n", "labels: zone and region: set both"},
		{"bad cidr", "global: {server: a, user: u, password: s3cret}\nnodes:\n  externalNetworkSubnetCidr: 10.0.0.0/33\n", `nodes externalNetworkSubnetCidr: "10.0.0.0/33" is not a CIDR`},
		{"bad ip family", "global: {server: a, user: u, password: s3cret, ipFamily: [ipv5]}\n", `ipFamily: "ipv5" is not ipv4 or ipv6`},
		{"not a mapping", "- a\n- b\n", "must be a mapping"},
		{"ini unknown key", "[Global]\nserver = a\nuser = u\npassword = s3cret\ninsecure = true\n", `line 5: [Global] insecure: unknown key`},
		{"ini unknown vc key", "[VirtualCenter \"a\"]\nuser = u\npassword = s3cret\nsecret = x\n", `[VirtualCenter "a"] secret: unknown key`},
		{"ini unknown section", "[Global]\nserver = a\n[Workspace]\nserver = a\n", "line 3: [Workspace]: unknown section"},
		{"ini load balancer", "[LoadBalancer]\nsize = small\n", "NSX-T load balancers are not supported"},
		{"ini vc without host", "[VirtualCenter]\nuser = u\n", `want [VirtualCenter "host"]`},
		{"ini bad bool", "[Global]\nserver = a\nuser = u\npassword = s3cret\ninsecure-flag = maybe\n", `insecure-flag: "maybe" is not a boolean`},
		{"ini bad port", "[Global]\nserver = a\nuser = u\npassword = s3cret\nport = x\n", `[Global] port: "x" is not a TCP port`},
		{"ini unterminated quote", "[Global]\nuser = \"u\n", "unterminated double quote"},
		{"ini key outside section", "user = u\n[Global]\n", "must be a mapping"}, // first line is not a header: read as YAML
		{"ini half the labels", "[Global]\nserver = a\nuser = u\npassword = s3cret\n[Labels]\nregion = r\n", "[Labels]: zone and region"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig(strings.NewReader(tc.in))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseConfig error = %v, want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
	if _, err := ParseConfig(nil); !errors.Is(err, ErrNoConfig) {
		t.Errorf("ParseConfig(nil) = %v, want ErrNoConfig", err)
	}
	if _, err := ParseConfig(strings.NewReader(" \n")); !errors.Is(err, ErrNoConfig) {
		t.Errorf("ParseConfig(blank) = %v, want ErrNoConfig", err)
	}
}

// FuzzParseConfig checks that any input is rejected or yields a config
// whose every vCenter has a server, a port, IP families and a credential
// source, and that nothing panics.
func FuzzParseConfig(f *testing.F) {
	f.Add("global:\n  server: a\n  user: u\n  password: p\n")
	f.Add("[Global]\nserver = a\nuser = u\npassword = \"p\\\"q\" ; c\n[Labels]\nzone = z\nregion = r\n")
	f.Fuzz(func(t *testing.T, in string) {
		cfg, err := ParseConfig(strings.NewReader(in))
		if err != nil {
			return
		}
		if len(cfg.VCenters) == 0 {
			t.Fatal("accepted a config without vCenters")
		}
		for _, v := range cfg.VCenters {
			if v.Server == "" || v.Port <= 0 || v.Port > 65535 || len(v.IPFamilies) == 0 || v.RoundTripCount <= 0 {
				t.Fatalf("accepted an incomplete vCenter %+v", v)
			}
			if v.SecretName == "" && v.SecretsDirectory == "" && (v.User == "" || v.Password == "") {
				t.Fatalf("accepted a vCenter without credentials: %+v", v)
			}
		}
		if (cfg.Labels.Zone == "") != (cfg.Labels.Region == "") {
			t.Fatalf("accepted half the labels: %+v", cfg.Labels)
		}
	})
}

func ipnets(ns []*net.IPNet) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.String())
	}
	return strings.Join(s, ",")
}

// TestConfigKeysDocumented: docs/vsphere.md's configuration reference names
// every key the YAML and INI forms accept.
func TestConfigKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/vsphere.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	keys = append(keys, yamlTopKeys...)
	keys = append(keys, yamlGlobalKeys...)
	keys = append(keys, yamlVCKeys...)
	keys = append(keys, yamlLabelKeys...)
	keys = append(keys, yamlNodeKeys[:]...)
	for _, k := range keys {
		if !strings.Contains(string(doc), k) {
			t.Errorf("docs/vsphere.md does not name the YAML key %s", k)
		}
	}
}
