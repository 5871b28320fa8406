package openstack

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	conf := `; upstream's example
[Global]
auth-url = "https://keystone.example:5000/v3"
username = ccm
password = "s3cr;et"   ; quoted, so the ; stays
user-domain-name = Users
project-name = k8s
project-domain-id = default
region = RegionOne
os-endpoint-type = internal
tls-insecure
[Networking]
ipv6-support-disabled = true
public-network-name = ext-a
public-network-name = ext-b
internal-network-name = int
[LoadBalancer]
enabled = false
monitor-delay = 7s
monitor-max-retries-down = 2
lb-method = least_connections
cascade-delete = false
[Route]
router-id = r-1
[Metadata]
search-order = configDrive,metadataService
[LoadBalancerClass "internal"]
subnet-id = sub-int
[LoadBalancerClass "public"]
floating-network-id = net-pub
`
	got, err := ParseConfig(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	want := defaults()
	*want = Config{AuthURL: "https://keystone.example:5000/v3", Username: "ccm", Password: "s3cr;et", UserDomainName: "Users",
		ProjectName: "k8s", ProjectDomainID: "default", Region: "RegionOne", EndpointType: "internal", TLSInsecure: true,
		IPv6Disabled: true, PublicNetworks: []string{"ext-a", "ext-b"}, InternalNetworks: []string{"int"}, LBDisabled: true,
		MonitorDelay: 7 * time.Second, MonitorTimeout: 3 * time.Second, MonitorMaxRetries: 1, MonitorMaxRetriesDown: 2,
		LBMethod: "LEAST_CONNECTIONS", CascadeDelete: false, RouterID: "r-1",
		Classes: map[string]*LBClass{"internal": {SubnetID: "sub-int"}, "public": {FloatingNetworkID: "net-pub"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	ao := got.authOptions()
	if ao.DomainName != "Users" || ao.Scope == nil || ao.Scope.ProjectName != "k8s" || ao.Scope.DomainID != "default" || !ao.AllowReauth {
		t.Errorf("auth options %+v scope %+v", ao, ao.Scope)
	}
}

func TestParseConfigErrors(t *testing.T) {
	const base = "[Global]\nauth-url = http://k/v3\nusername = u\npassword = p\n"
	for _, tc := range []struct{ conf, want string }{
		{base + "colour = red\n", "line 5: [Global] colour: unknown key"},
		{base + "trust-id = x\n", "[Global] trust-id: not supported: trusts"},
		{base + "use-clouds = true\n", "[Global] use-clouds: not supported: clouds.yaml"},
		{base + "[LoadBalancer]\nmember-subnet-id = n\n", "[LoadBalancer] member-subnet-id: not supported by this provider's load balancers"},
		{base + "[LoadBalancer]\ncreate-monitor = sometimes\n", "[LoadBalancer] create-monitor: \"sometimes\" is not a boolean"},
		{base + "[LoadBalancerClass]\n", `[LoadBalancerClass] needs a name`},
		{base + "[LoadBalancerClass \"a\"]\n[LoadBalancerClass \"a\"]\n", `class "a" is defined twice`},
		{base + "[LoadBalancerClass \"a\"]\nnetwork-id = n\n", `[LoadBalancerClass] network-id: not supported by this provider's load balancers`},
		{base + "[LoadBalancerClass \"a\"]\ncolour = red\n", `[LoadBalancerClass] colour: unknown key`},
		{base + "[LoadBalancer]\nlb-method = RANDOM\n", `[LoadBalancer] lb-method: "RANDOM": want one of ROUND_ROBIN`},
		{base + "[LoadBalancer]\nmonitor-delay = 5\n", `[LoadBalancer] monitor-delay: "5" is not a positive duration`},
		{base + "[LoadBalancer]\nmonitor-max-retries = 0\n", `[LoadBalancer] monitor-max-retries: "0" is not a whole number of at least 1`},
		{base + "[Route]\nrouter = r\n", "[Route] router: unknown key"},
		{base + "[BlockStorage]\n", "[BlockStorage]: unknown section"},
		{base + "tls-insecure = maybe\n", `[Global] tls-insecure: "maybe" is not a boolean`},
		{base + "os-endpoint-type = private\n", `os-endpoint-type "private"`},
		{"username = u\n", "line 1: a key before the first section header"},
		{"[Global]\nusername = u\npassword = p\n", "[Global] auth-url is required"},
		{"[Global]\nauth-url = http://k\nusername = u\n", "[Global] password"},
		{"[Global]\nauth-url = http://k\npassword = p\n", "[Global] username or user-id is required"},
		{"[Global]\nauth-url = http://k\napplication-credential-id = i\n", "application-credential-secret is required"},
		{"[Global]\nauth-url = http://k\napplication-credential-name = n\napplication-credential-secret = s\n", "application-credential-name needs user-id or username"},
	} {
		_, err := ParseConfig(strings.NewReader(tc.conf))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%q) = %v, want an error containing %q", tc.conf, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cr") {
			t.Errorf("error shows the password: %v", err)
		}
	}
}

func TestProviderIDs(t *testing.T) {
	for id, want := range map[string]string{"openstack:///abc": "abc", "openstack://RegionOne/abc": "abc"} {
		if got, err := serverID(id); err != nil || got != want {
			t.Errorf("serverID(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
	for _, bad := range []string{"aws:///abc", "openstack:///", "openstack://abc", "openstack:///a/b"} {
		if got, err := serverID(bad); err == nil {
			t.Errorf("serverID(%q) = %q, want an error", bad, got)
		}
	}
}

// TestConfigKeysDocumented: docs/openstack.md names every key the parser
// knows, supported or not.
func TestConfigKeysDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/openstack.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.Contains(string(doc), "`"+k.name+"`") {
			t.Errorf("docs/openstack.md does not name [%s] `%s`", sectionNames[k.section], k.name)
		}
	}
	for name := range classKeys {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/openstack.md does not name [LoadBalancerClass] `%s`", name)
		}
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add("[Global]\nauth-url = http://k/v3\nusername = u\npassword = \"p;\\\"q\"\n[Networking]\npublic-network-name = a\n")
	f.Add("[LoadBalancer]\nenabled\n")
	f.Fuzz(func(t *testing.T, conf string) {
		c, err := ParseConfig(strings.NewReader(conf))
		if err == nil && c.AuthURL == "" {
			t.Errorf("accepted a config without auth-url: %q", conf)
		}
	})
}
