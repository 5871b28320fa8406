package vsphere

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/stratus-ccm/stratus/providers/internal/gitini"
)

// The legacy INI form follows git-config syntax (upstream reads it with
// gcfg): "[Section]" and "[Section "subsection"]" headers, "key = value"
// lines, a key alone meaning true, ";" and "#" comments, and double-quoted
// values with \" \\ \n \t escapes. Section and key names are
// case-insensitive, subsection names are not.

var (
	iniGlobalKeys = []string{"user", "password", "server", "port", "insecure-flag", "datacenters", "soap-roundtrip-count",
		"ca-file", "thumbprint", "secret-name", "secret-namespace", "secrets-directory", "api-disable", "api-binding", "ip-family"}
	iniVCKeys = []string{"user", "password", "server", "port", "insecure-flag", "datacenters", "soap-roundtrip-count",
		"ca-file", "thumbprint", "secret-name", "secret-namespace", "ip-family"}
	iniLabelKeys = []string{"zone", "region"}
	iniNodeKeys  = [6]string{"internal-network-subnet-cidr", "external-network-subnet-cidr", "exclude-internal-network-subnet-cidr",
		"exclude-external-network-subnet-cidr", "internal-vm-network-name", "external-vm-network-name"}
	iniSections = []string{"Global", "VirtualCenter", "Labels", "Nodes"}
)

// parseINI reads the legacy INI form.
func parseINI(data []byte) (*rawConfig, error) {
	raw := &rawConfig{vcenters: map[string]*rawVC{}, nodes: map[string]string{}, nodeKeys: iniNodeKeys, formatTag: "INI"}
	var (
		section string // lower-case section name; "" before the first header
		header  string // the header as written, for errors
		vc      *rawVC
	)
	for n, line := range strings.Split(string(data), "\n") {
		lineNo := n + 1
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == ';' || line[0] == '#' {
			continue
		}
		if line[0] == '[' {
			name, sub, hasSub, err := gitini.Header(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			section, header = strings.ToLower(name), line
			switch {
			case section == "global" && !hasSub, section == "labels" && !hasSub, section == "nodes" && !hasSub:
			case section == "virtualcenter" && hasSub:
				if vc = raw.vcenters[sub]; vc == nil {
					vc = &rawVC{}
					raw.vcenters[sub] = vc
				}
				header = fmt.Sprintf("[VirtualCenter %q]", sub)
			case section == "virtualcenter":
				return nil, fmt.Errorf(`line %d: %s: want [VirtualCenter "host"]`, lineNo, line)
			default:
				if why, ok := unsupportedSections[section]; ok {
					return nil, fmt.Errorf("line %d: %s: %s", lineNo, line, why)
				}
				return nil, fmt.Errorf("line %d: %s: unknown section (known sections: %s)", lineNo, line, strings.Join(iniSections, ", "))
			}
			continue
		}
		if section == "" {
			return nil, fmt.Errorf("line %d: a key outside of any section", lineNo)
		}
		key, value, err := gitini.Variable(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", lineNo, header, err)
		}
		where := header + " " + key
		switch section {
		case "global":
			err = setINIVC(&raw.global, key, value, where, iniGlobalKeys)
		case "virtualcenter":
			err = setINIVC(vc, key, value, where, iniVCKeys)
		case "labels":
			switch key {
			case "zone":
				raw.labels.Zone = value
			case "region":
				raw.labels.Region = value
			default:
				err = fmt.Errorf("%s: unknown key (known keys: %s)", where, strings.Join(iniLabelKeys, ", "))
			}
		case "nodes":
			if !slices.Contains(iniNodeKeys[:], key) {
				err = fmt.Errorf("%s: unknown key (known keys: %s)", where, strings.Join(iniNodeKeys[:], ", "))
			} else {
				raw.nodes[key] = value
			}
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
	return raw, nil
}

func setINIVC(vc *rawVC, key, value, where string, allowed []string) error {
	if !slices.Contains(allowed, key) {
		return fmt.Errorf("%s: unknown key (known keys: %s)", where, strings.Join(allowed, ", "))
	}
	var err error
	switch key {
	case "user":
		vc.User = value
	case "password":
		vc.Password = value
	case "server":
		vc.Server = value
	case "port":
		vc.Port, err = parsePort(where, value)
	case "insecure-flag":
		vc.InsecureFlag, err = gitini.Bool(where, value)
	case "datacenters":
		vc.Datacenters = strings.Split(value, ",")
	case "soap-roundtrip-count":
		n, perr := strconv.Atoi(value)
		if perr != nil || n < 0 {
			err = fmt.Errorf("%s: %q is not a count", where, value)
		}
		vc.RoundTripCount = n
	case "ca-file":
		vc.CAFile = value
	case "thumbprint":
		vc.Thumbprint = value
	case "secret-name":
		vc.SecretName = value
	case "secret-namespace":
		vc.SecretNamespace = value
	case "secrets-directory":
		vc.SecretsDirectory = value
	case "ip-family":
		vc.IPFamilies = strings.Split(value, ",")
	case "api-disable", "api-binding":
		// upstream's own HTTP API; accepted and ignored.
	}
	return err
}
