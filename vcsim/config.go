package vcsim

import (
	"net"
	"strconv"

	"sigs.k8s.io/yaml"
)

// Trust selects how a cloud config trusts the server's certificate.
type Trust int

const (
	// TrustCAFile names the CA file (caFile).
	TrustCAFile Trust = iota
	// TrustThumbprint pins the certificate's SHA-1 thumbprint (thumbprint).
	TrustThumbprint
)

// cloudConfig is the YAML cloud config of the upstream vSphere provider,
// the subset that reaches this server.
type cloudConfig struct {
	Global struct {
		Server       string   `json:"server"`
		Port         int      `json:"port"`
		User         string   `json:"user"`
		Password     string   `json:"password"`
		CAFile       string   `json:"caFile,omitempty"`
		Thumbprint   string   `json:"thumbprint,omitempty"`
		InsecureFlag bool     `json:"insecureFlag,omitempty"`
		Datacenters  []string `json:"datacenters"`
	} `json:"global"`
	Labels struct {
		Zone   string `json:"zone"`
		Region string `json:"region"`
	} `json:"labels"`
}

// CloudConfig returns a cloud config for this server in the YAML format of
// the upstream vSphere provider (global: server, port, user, password,
// caFile or thumbprint, datacenters; labels: zone and region categories).
// The upstream provider always speaks HTTPS, so a server with DisableTLS
// gets insecureFlag and is not reachable by it.
func (s *Server) CloudConfig(trust Trust) []byte {
	var c cloudConfig
	host, port, _ := net.SplitHostPort(s.addr)
	c.Global.Server = host
	c.Global.Port, _ = strconv.Atoi(port)
	c.Global.User, c.Global.Password = s.opts.Username, s.opts.Password
	switch {
	case !s.TLS():
		c.Global.InsecureFlag = true
	case trust == TrustThumbprint:
		c.Global.Thumbprint = s.Thumbprint()
	default:
		c.Global.CAFile = s.CAFile()
	}
	c.Global.Datacenters = s.Datacenters()
	c.Labels.Zone, c.Labels.Region = s.opts.ZoneCategory, s.opts.RegionCategory
	out, err := yaml.Marshal(c)
	if err != nil {
		panic("vcsim: marshal the cloud config: " + err.Error()) // plain strings and ints always marshal
	}
	return out
}
