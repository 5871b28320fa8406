package vsphere

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// maxConfigSize bounds the cloud config file (it is a handful of sections).
const maxConfigSize = 1 << 20

// Defaults the upstream vSphere cloud provider uses too.
const (
	// DefaultPort is the vCenter HTTPS port when the config sets none.
	DefaultPort = 443
	// DefaultRoundTripCount is how many times a SOAP call is tried on a
	// temporary network error when soapRoundtripCount is not set.
	DefaultRoundTripCount = 3
)

// IP families of the ipFamily key.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
)

// Config is the provider's cloud config, in the upstream vSphere cloud
// provider's format so that a cluster can switch providers without
// rewriting it. Both of upstream's forms are read: YAML
//
//	global:
//	  port: 443
//	  insecureFlag: false
//	  secretName: vsphere-creds
//	  secretNamespace: kube-system
//	vcenter:
//	  vc1:
//	    server: vc1.example.com
//	    datacenters: [dc1]
//	labels:
//	  region: k8s-region
//	  zone: k8s-zone
//	nodes:
//	  internalNetworkSubnetCidr: 10.0.0.0/8
//
// and the legacy INI form ([Global], [VirtualCenter "host"], [Labels],
// [Nodes] with keys such as insecure-flag and secret-name). Unknown keys
// are rejected with their path. Settings of [Global] / global: are the
// defaults of every vCenter, as upstream. Passwords are never printed:
// String redacts them.
type Config struct {
	// VCenters are the vCenters to watch, sorted by Name.
	VCenters []*VCenter
	// Labels names the tag categories of zones and regions.
	Labels Labels
	// Nodes selects node addresses from the VMs' guest networks.
	Nodes Nodes
}

// VCenter is one vCenter's connection settings after the global defaults
// were applied.
type VCenter struct {
	// Name is the key of the vCenter in the config (the YAML key under
	// vcenter, or the INI section's subsection name).
	Name string
	// Server is the vCenter host name or IP address (key "server"; in INI
	// the section name when server is not set).
	Server string
	// Port is the HTTPS port (key "port", default 443).
	Port int
	// User and Password are inline credentials (keys "user", "password").
	User     string
	Password string
	// SecretName and SecretNamespace name a Kubernetes Secret with the
	// keys "<server>.username" and "<server>.password".
	SecretName      string
	SecretNamespace string
	// SecretsDirectory is a directory with one file per key of such a
	// Secret (a mounted Secret; key "secretsDirectory" of global).
	SecretsDirectory string
	// Datacenters limits the VMs to these datacenters (by name); empty means
	// all.
	Datacenters []string
	// InsecureFlag skips verifying the server's certificate.
	InsecureFlag bool
	// CAFile is a PEM file of CAs to verify the server's certificate with.
	CAFile string
	// Thumbprint is the SHA-1 fingerprint of the server's certificate
	// (AA:BB:...); a certificate with this thumbprint is trusted.
	Thumbprint string
	// IPFamilies orders the IP families of node addresses (ipv4, ipv6).
	IPFamilies []string
	// RoundTripCount is how often a SOAP call is tried on a temporary
	// network error (key "soapRoundtripCount").
	RoundTripCount int
}

// Labels names the vSphere tag categories whose tags are the zones and
// regions of hosts, clusters and datacenters. Both must be set for the
// provider to report zones, as upstream.
type Labels struct {
	Zone   string
	Region string
}

// Enabled reports whether zones and regions are configured.
func (l Labels) Enabled() bool { return l.Zone != "" && l.Region != "" }

// Nodes selects which guest IP addresses become a node's InternalIP and
// ExternalIP, as upstream's nodes: section does.
type Nodes struct {
	InternalNetworkSubnets        []*net.IPNet
	ExternalNetworkSubnets        []*net.IPNet
	ExcludeInternalNetworkSubnets []*net.IPNet
	ExcludeExternalNetworkSubnets []*net.IPNet
	InternalVMNetworkName         string
	ExternalVMNetworkName         string
}

// credentialSource says where a vCenter's credentials come from.
func (v *VCenter) credentialSource() string {
	switch {
	case v.SecretName != "":
		return "Secret " + v.SecretNamespace + "/" + v.SecretName
	case v.SecretsDirectory != "":
		return "directory " + v.SecretsDirectory
	default:
		return "config"
	}
}

// String describes the config without passwords.
func (c Config) String() string {
	var b strings.Builder
	b.WriteString("vsphere config{")
	for i, v := range c.VCenters {
		if i > 0 {
			b.WriteString(", ")
		}
		pw := "<none>"
		if v.Password != "" {
			pw = "<redacted>"
		}
		fmt.Fprintf(&b, "vcenter %q: {server: %q, port: %d, user: %q, password: %s, credentials: %s, datacenters: %v, insecure: %t, ipFamily: %v}",
			v.Name, v.Server, v.Port, v.User, pw, v.credentialSource(), v.Datacenters, v.InsecureFlag, v.IPFamilies)
	}
	fmt.Fprintf(&b, ", labels: {zone: %q, region: %q}}", c.Labels.Zone, c.Labels.Region)
	return b.String()
}

// ErrNoConfig is returned when the provider gets no cloud config at all.
var ErrNoConfig = errors.New("vsphere config: a cloud config is required (--cloud-config with at least one vCenter)")

// rawVC holds one vCenter's or the global section's keys before defaults.
// Strings that upstream reads as numbers or booleans are kept as typed
// values with a "set" flag where the default depends on it.
type rawVC struct {
	Server           string
	Port             int
	User             string
	Password         string
	Datacenters      []string
	InsecureFlag     bool
	CAFile           string
	Thumbprint       string
	SecretName       string
	SecretNamespace  string
	SecretsDirectory string
	IPFamilies       []string
	RoundTripCount   int
}

// rawConfig is either form of the file, before validation.
type rawConfig struct {
	global    rawVC
	vcenters  map[string]*rawVC
	labels    Labels
	nodes     map[string]string // key in the file → value, for errors naming keys
	nodeKeys  [6]string         // the file's key names of the six nodes settings
	formatTag string            // "YAML" or "INI" for errors
}

// ParseConfig reads and validates a cloud config in either of upstream's
// forms: INI when the first line that is neither blank nor a comment starts
// with "[", YAML otherwise. It reads no credentials from files or Secrets.
func ParseConfig(r io.Reader) (*Config, error) {
	if r == nil {
		return nil, ErrNoConfig
	}
	data, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("vsphere config: read: %w", err)
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("vsphere config: larger than %d bytes", maxConfigSize)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, ErrNoConfig
	}
	var raw *rawConfig
	if looksLikeINI(data) {
		raw, err = parseINI(data)
	} else {
		raw, err = parseYAML(data)
	}
	if err != nil {
		return nil, fmt.Errorf("vsphere config: %w", err)
	}
	cfg, err := raw.build()
	if err != nil {
		return nil, fmt.Errorf("vsphere config: %w", err)
	}
	return cfg, nil
}

// looksLikeINI reports whether the first significant line is a section
// header.
func looksLikeINI(data []byte) bool {
	for line := range strings.SplitSeq(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		return line[0] == '['
	}
	return false
}

// The YAML keys, by section, as upstream spells them.
var (
	yamlTopKeys    = []string{"global", "vcenter", "labels", "nodes"}
	yamlGlobalKeys = []string{"server", "port", "user", "password", "insecureFlag", "datacenters", "caFile", "thumbprint",
		"secretName", "secretNamespace", "secretsDirectory", "soapRoundtripCount", "ipFamily", "apiBinding", "apiDisable"}
	yamlVCKeys = []string{"server", "port", "user", "password", "datacenters", "insecureFlag", "caFile", "thumbprint",
		"secretName", "secretNamespace", "soapRoundtripCount", "ipFamily"}
	yamlLabelKeys = []string{"zone", "region"}
	yamlNodeKeys  = [6]string{"internalNetworkSubnetCidr", "externalNetworkSubnetCidr", "excludeInternalNetworkSubnetCidr",
		"excludeExternalNetworkSubnetCidr", "internalVmNetworkName", "externalVmNetworkName"}
)

// unsupportedSections are upstream features this provider does not have;
// naming them makes the error say so.
var unsupportedSections = map[string]string{
	"loadbalancer": "NSX-T load balancers are not supported by this provider",
	"nsxt":         "NSX-T is not supported by this provider",
	"route":        "NSX-T routes are not supported by this provider",
}

func parseYAML(data []byte) (*rawConfig, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("not valid YAML (nor INI): %w", err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(js, &top); err != nil || top == nil {
		return nil, errors.New("the YAML document must be a mapping with global, vcenter, labels and nodes")
	}
	raw := &rawConfig{vcenters: map[string]*rawVC{}, nodes: map[string]string{}, nodeKeys: yamlNodeKeys, formatTag: "YAML"}
	for _, k := range sortedKeys(top) {
		v := top[k]
		if !slices.Contains(yamlTopKeys, k) {
			return nil, unknownKey(k, yamlTopKeys)
		}
		switch k {
		case "global":
			if err := decodeYAMLVC(k, v, yamlGlobalKeys, &raw.global); err != nil {
				return nil, err
			}
		case "vcenter":
			var vcs map[string]json.RawMessage
			if err := json.Unmarshal(v, &vcs); err != nil {
				return nil, errors.New("vcenter: must be a mapping of names to vCenter settings")
			}
			for name, body := range vcs {
				vc := &rawVC{}
				if err := decodeYAMLVC("vcenter."+name, body, yamlVCKeys, vc); err != nil {
					return nil, err
				}
				raw.vcenters[name] = vc
			}
		case "labels":
			m, err := stringMap(k, v, yamlLabelKeys)
			if err != nil {
				return nil, err
			}
			raw.labels = Labels{Zone: m["zone"], Region: m["region"]}
		case "nodes":
			m, err := stringMap(k, v, yamlNodeKeys[:])
			if err != nil {
				return nil, err
			}
			raw.nodes = m
		}
	}
	return raw, nil
}

// decodeYAMLVC decodes a global or vcenter entry, rejecting unknown keys
// and values of the wrong type with the key's path.
func decodeYAMLVC(path string, body json.RawMessage, allowed []string, vc *rawVC) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		if string(body) == "null" {
			return nil
		}
		return fmt.Errorf("%s: must be a mapping", path)
	}
	for _, k := range sortedKeys(m) {
		v := m[k]
		key := path + "." + k
		if !slices.Contains(allowed, k) {
			return unknownKey(key, allowed)
		}
		var err error
		switch k {
		case "server":
			err = json.Unmarshal(v, &vc.Server)
		case "port":
			err = json.Unmarshal(v, &vc.Port)
			if err == nil && (vc.Port <= 0 || vc.Port > 65535) {
				return fmt.Errorf("%s: %d is not a TCP port", key, vc.Port)
			}
		case "user":
			err = json.Unmarshal(v, &vc.User)
		case "password":
			err = json.Unmarshal(v, &vc.Password)
		case "insecureFlag":
			err = json.Unmarshal(v, &vc.InsecureFlag)
		case "datacenters":
			err = json.Unmarshal(v, &vc.Datacenters)
		case "caFile":
			err = json.Unmarshal(v, &vc.CAFile)
		case "thumbprint":
			err = json.Unmarshal(v, &vc.Thumbprint)
		case "secretName":
			err = json.Unmarshal(v, &vc.SecretName)
		case "secretNamespace":
			err = json.Unmarshal(v, &vc.SecretNamespace)
		case "secretsDirectory":
			err = json.Unmarshal(v, &vc.SecretsDirectory)
		case "soapRoundtripCount":
			err = json.Unmarshal(v, &vc.RoundTripCount)
			if err == nil && vc.RoundTripCount < 0 {
				return fmt.Errorf("%s: must not be negative", key)
			}
		case "ipFamily":
			err = json.Unmarshal(v, &vc.IPFamilies)
		case "apiBinding", "apiDisable":
			// upstream's own HTTP API; stratus serves none. Accepted so that
			// upstream's files parse; the value is ignored.
		}
		if err != nil {
			return fmt.Errorf("%s: wrong type: %s", key, typeHint(k))
		}
	}
	return nil
}

func typeHint(key string) string {
	switch key {
	case "port", "soapRoundtripCount":
		return "want a number"
	case "insecureFlag":
		return "want true or false"
	case "datacenters", "ipFamily":
		return "want a list of strings"
	default:
		return "want a string"
	}
}

// stringMap decodes a mapping of string values with allowed keys.
func stringMap(path string, body json.RawMessage, allowed []string) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		if string(body) == "null" {
			return map[string]string{}, nil
		}
		return nil, fmt.Errorf("%s: must be a mapping", path)
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) {
		if !slices.Contains(allowed, k) {
			return nil, unknownKey(path+"."+k, allowed)
		}
		var s string
		if err := json.Unmarshal(m[k], &s); err != nil {
			return nil, fmt.Errorf("%s.%s: wrong type: want a string", path, k)
		}
		out[k] = s
	}
	return out, nil
}

func unknownKey(path string, allowed []string) error {
	last := path[strings.LastIndex(path, ".")+1:]
	if why, ok := unsupportedSections[strings.ToLower(last)]; ok && !strings.Contains(path, ".") {
		return fmt.Errorf("%s: %s", path, why)
	}
	return fmt.Errorf("%s: unknown key (known keys: %s)", path, strings.Join(allowed, ", "))
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// build applies upstream's defaults and checks the result.
func (raw *rawConfig) build() (*Config, error) {
	g := raw.global
	section := func(name string) string {
		if raw.formatTag == "INI" {
			return fmt.Sprintf("[VirtualCenter %q]", name)
		}
		return "vcenter." + name
	}
	if g.Server != "" {
		if _, ok := raw.vcenters[g.Server]; !ok {
			raw.vcenters[g.Server] = &rawVC{Server: g.Server}
		}
	}
	if len(raw.vcenters) == 0 {
		if raw.formatTag == "INI" {
			return nil, errors.New(`no vCenter: set server in [Global] or add a [VirtualCenter "host"] section`)
		}
		return nil, errors.New("no vCenter: set global.server or add an entry under vcenter")
	}
	globalSecret := g.SecretName != "" || g.SecretNamespace != ""
	if globalSecret && (g.SecretName == "" || g.SecretNamespace == "") {
		return nil, fmt.Errorf("%s: secretName and secretNamespace: set both or neither", globalName(raw.formatTag))
	}
	cfg := &Config{Labels: raw.labels}
	if (cfg.Labels.Zone == "") != (cfg.Labels.Region == "") {
		return nil, fmt.Errorf("%s: zone and region: set both tag categories or neither (zones need both, as upstream)", labelsName(raw.formatTag))
	}
	nodes, err := raw.buildNodes()
	if err != nil {
		return nil, err
	}
	cfg.Nodes = nodes
	servers := map[string]string{}
	for _, name := range sortedKeys(raw.vcenters) {
		r := raw.vcenters[name]
		where := section(name)
		if name == "" {
			return nil, fmt.Errorf("%s: a vCenter needs a name", where)
		}
		vc := &VCenter{Name: name, Server: r.Server, Port: r.Port, User: r.User, Password: r.Password,
			SecretName: r.SecretName, SecretNamespace: r.SecretNamespace, Datacenters: r.Datacenters,
			InsecureFlag: r.InsecureFlag || g.InsecureFlag, CAFile: r.CAFile, Thumbprint: r.Thumbprint,
			IPFamilies: r.IPFamilies, RoundTripCount: r.RoundTripCount}
		if vc.Server == "" {
			if raw.formatTag == "YAML" {
				return nil, fmt.Errorf("%s.server: required", where)
			}
			vc.Server = name
		}
		if strings.ContainsAny(vc.Server, "/?#@ ") {
			return nil, fmt.Errorf("%s: server %q: want a host name or IP address, not a URL", where, vc.Server)
		}
		if other, dup := servers[vc.Server]; dup {
			return nil, fmt.Errorf("%s: server %s is also configured as %s", where, vc.Server, other)
		}
		servers[vc.Server] = where
		vc.Port = firstNonZero(vc.Port, g.Port, DefaultPort)
		vc.RoundTripCount = firstNonZero(vc.RoundTripCount, g.RoundTripCount, DefaultRoundTripCount)
		if len(vc.Datacenters) == 0 {
			vc.Datacenters = g.Datacenters
		}
		vc.Datacenters = trimAll(vc.Datacenters)
		if vc.CAFile == "" {
			vc.CAFile = g.CAFile
		}
		if vc.Thumbprint == "" {
			vc.Thumbprint = g.Thumbprint
		}
		if len(vc.IPFamilies) == 0 {
			vc.IPFamilies = g.IPFamilies
		}
		if vc.IPFamilies, err = checkIPFamilies(where, trimAll(vc.IPFamilies)); err != nil {
			return nil, err
		}
		if (vc.SecretName == "") != (vc.SecretNamespace == "") {
			return nil, fmt.Errorf("%s: secretName and secretNamespace: set both or neither", where)
		}
		// Credentials: the vCenter's own Secret, else the global Secret or
		// secrets directory, else inline user and password (the
		// vCenter's, else global), as upstream.
		switch {
		case vc.SecretName != "":
			vc.User, vc.Password = "", ""
		case globalSecret:
			vc.SecretName, vc.SecretNamespace, vc.User, vc.Password = g.SecretName, g.SecretNamespace, "", ""
		case g.SecretsDirectory != "":
			vc.SecretsDirectory, vc.User, vc.Password = g.SecretsDirectory, "", ""
		default:
			if vc.User == "" {
				vc.User = g.User
			}
			if vc.Password == "" {
				vc.Password = g.Password
			}
			if vc.User == "" {
				return nil, fmt.Errorf("%s: user: required (or secretName and secretNamespace, or a global secretsDirectory)", where)
			}
			if vc.Password == "" {
				return nil, fmt.Errorf("%s: password: required (or secretName and secretNamespace, or a global secretsDirectory)", where)
			}
		}
		cfg.VCenters = append(cfg.VCenters, vc)
	}
	return cfg, nil
}

func globalName(format string) string {
	if format == "INI" {
		return "[Global]"
	}
	return "global"
}

func labelsName(format string) string {
	if format == "INI" {
		return "[Labels]"
	}
	return "labels"
}

func (raw *rawConfig) buildNodes() (Nodes, error) {
	var n Nodes
	section := "nodes"
	if raw.formatTag == "INI" {
		section = "[Nodes]"
	}
	cidrs := []*[]*net.IPNet{&n.InternalNetworkSubnets, &n.ExternalNetworkSubnets, &n.ExcludeInternalNetworkSubnets, &n.ExcludeExternalNetworkSubnets}
	for i, dst := range cidrs {
		key := raw.nodeKeys[i]
		value := strings.TrimSpace(raw.nodes[key])
		if value == "" {
			continue
		}
		for s := range strings.SplitSeq(value, ",") {
			_, ipnet, err := net.ParseCIDR(strings.TrimSpace(s))
			if err != nil {
				return n, fmt.Errorf("%s %s: %q is not a CIDR", section, key, strings.TrimSpace(s))
			}
			*dst = append(*dst, ipnet)
		}
	}
	n.InternalVMNetworkName = strings.TrimSpace(raw.nodes[raw.nodeKeys[4]])
	n.ExternalVMNetworkName = strings.TrimSpace(raw.nodes[raw.nodeKeys[5]])
	return n, nil
}

func checkIPFamilies(where string, fams []string) ([]string, error) {
	if len(fams) == 0 {
		return []string{IPv4}, nil
	}
	out := make([]string, 0, len(fams))
	for _, f := range fams {
		f = strings.ToLower(f)
		if f != IPv4 && f != IPv6 {
			return nil, fmt.Errorf("%s: ipFamily: %q is not ipv4 or ipv6", where, f)
		}
		if slices.Contains(out, f) {
			return nil, fmt.Errorf("%s: ipFamily: %s is listed twice", where, f)
		}
		out = append(out, f)
	}
	return out, nil
}

func trimAll(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func firstNonZero(vs ...int) int {
	for _, v := range vs {
		if v != 0 {
			return v
		}
	}
	return 0
}

// parsePort reads an INI port value.
func parsePort(key, value string) (int, error) {
	p, err := strconv.Atoi(value)
	if err != nil || p <= 0 || p > 65535 {
		return 0, fmt.Errorf("%s: %q is not a TCP port", key, value)
	}
	return p, nil
}
