package vsphere

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
			name, sub, hasSub, err := parseINIHeader(line)
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
		key, value, err := parseINIVariable(line)
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

// parseINIHeader splits `[name]` or `[name "sub"]`.
func parseINIHeader(line string) (name, sub string, hasSub bool, err error) {
	end := strings.LastIndexByte(line, ']')
	if end < 0 {
		return "", "", false, fmt.Errorf("%s: a section header must end with ]", line)
	}
	if rest := strings.TrimSpace(line[end+1:]); rest != "" && rest[0] != ';' && rest[0] != '#' {
		return "", "", false, fmt.Errorf("%s: text after the section header", line)
	}
	inner := strings.TrimSpace(line[1:end])
	name, quoted, hasSub := strings.Cut(inner, " ")
	if !validININame(name) {
		return "", "", false, fmt.Errorf("%s: invalid section name", line)
	}
	if !hasSub {
		return name, "", false, nil
	}
	quoted = strings.TrimSpace(quoted)
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return "", "", false, fmt.Errorf(`%s: a subsection name must be double-quoted`, line)
	}
	sub, err = unquoteINI(quoted[1 : len(quoted)-1])
	if err != nil {
		return "", "", false, fmt.Errorf("%s: %w", line, err)
	}
	return name, sub, true, nil
}

func validININame(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '-'):
		default:
			return false
		}
	}
	return true
}

// parseINIVariable splits `key = value`, `key` (true) and strips comments
// and quotes from the value.
func parseINIVariable(line string) (key, value string, err error) {
	k, v, hasValue := strings.Cut(line, "=")
	key = strings.ToLower(strings.TrimSpace(k))
	if !hasValue {
		// "key ; comment" or a bare key
		if i := strings.IndexAny(key, ";#"); i >= 0 {
			key = strings.TrimSpace(key[:i])
		}
		if !validININame(key) {
			return "", "", fmt.Errorf("%q: want key = value", line)
		}
		return key, "true", nil
	}
	if !validININame(key) {
		return "", "", fmt.Errorf("%q: invalid key name", strings.TrimSpace(k))
	}
	value, err = iniValue(v)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", key, err)
	}
	return key, value, nil
}

// iniValue removes comments outside quotes, the quotes, and resolves
// escapes; unquoted surrounding white space is dropped.
func iniValue(v string) (string, error) {
	var b strings.Builder
	inQuote := false
	pendingSpace := ""
	started := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			if i+1 >= len(v) {
				return "", errors.New("a value must not end with a backslash (line continuations are not supported)")
			}
			i++
			var r byte
			switch v[i] {
			case '\\', '"':
				r = v[i]
			case 'n':
				r = '\n'
			case 't':
				r = '\t'
			default:
				return "", fmt.Errorf("unknown escape \\%c", v[i])
			}
			b.WriteString(pendingSpace)
			pendingSpace = ""
			b.WriteByte(r)
			started = true
		case c == '"':
			b.WriteString(pendingSpace)
			pendingSpace = ""
			inQuote = !inQuote
			started = true
		case !inQuote && (c == ';' || c == '#'):
			return b.String(), nil
		case !inQuote && (c == ' ' || c == '\t'):
			if started {
				pendingSpace += string(c)
			}
		default:
			b.WriteString(pendingSpace)
			pendingSpace = ""
			b.WriteByte(c)
			started = true
		}
	}
	if inQuote {
		return "", errors.New("unterminated double quote")
	}
	return b.String(), nil
}

func unquoteINI(s string) (string, error) {
	if strings.ContainsAny(s, "\n") {
		return "", errors.New("newline in subsection name")
	}
	return iniValue(`"` + s + `"`)
}

// parseINIBool reads gcfg's booleans.
func parseINIBool(where, value string) (bool, error) {
	switch strings.ToLower(value) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0", "":
		return false, nil
	}
	return false, fmt.Errorf("%s: %q is not a boolean (true or false)", where, value)
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
		vc.InsecureFlag, err = parseINIBool(where, value)
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
