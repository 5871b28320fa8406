// Package gitini reads the lines of git-config style INI files, the format
// upstream cloud providers read with gcfg: "[Section]" and
// "[Section "subsection"]" headers, "key = value" lines, a key alone meaning
// true, ";" and "#" comments, and double-quoted values with \" \\ \n \t
// escapes. Section and key names are case-insensitive, subsection names are
// not. Providers walk the lines themselves so that every unknown section or
// key is an error naming it.
package gitini

import (
	"errors"
	"fmt"
	"strings"
)

// Header splits a section header line, `[name]` or `[name "sub"]`.
func Header(line string) (name, sub string, hasSub bool, err error) {
	end := strings.LastIndexByte(line, ']')
	if end < 0 {
		return "", "", false, fmt.Errorf("%s: a section header must end with ]", line)
	}
	if rest := strings.TrimSpace(line[end+1:]); rest != "" && rest[0] != ';' && rest[0] != '#' {
		return "", "", false, fmt.Errorf("%s: text after the section header", line)
	}
	inner := strings.TrimSpace(line[1:end])
	name, quoted, hasSub := strings.Cut(inner, " ")
	if !validName(name) {
		return "", "", false, fmt.Errorf("%s: invalid section name", line)
	}
	if !hasSub {
		return name, "", false, nil
	}
	quoted = strings.TrimSpace(quoted)
	if len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
		return "", "", false, fmt.Errorf(`%s: a subsection name must be double-quoted`, line)
	}
	sub, err = unquote(quoted[1 : len(quoted)-1])
	if err != nil {
		return "", "", false, fmt.Errorf("%s: %w", line, err)
	}
	return name, sub, true, nil
}

func validName(s string) bool {
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

// Variable splits a variable line, `key = value`, `key` (true) and strips comments
// and quotes from the value.
func Variable(line string) (key, value string, err error) {
	k, v, hasValue := strings.Cut(line, "=")
	key = strings.ToLower(strings.TrimSpace(k))
	if !hasValue {
		// "key ; comment" or a bare key
		if i := strings.IndexAny(key, ";#"); i >= 0 {
			key = strings.TrimSpace(key[:i])
		}
		if !validName(key) {
			return "", "", fmt.Errorf("%q: want key = value", line)
		}
		return key, "true", nil
	}
	if !validName(key) {
		return "", "", fmt.Errorf("%q: invalid key name", strings.TrimSpace(k))
	}
	value, err = unquoteValue(v)
	if err != nil {
		return "", "", fmt.Errorf("%s: %w", key, err)
	}
	return key, value, nil
}

// unquoteValue removes comments outside quotes, the quotes, and resolves
// escapes; unquoted surrounding white space is dropped.
func unquoteValue(v string) (string, error) {
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

func unquote(s string) (string, error) {
	if strings.ContainsAny(s, "\n") {
		return "", errors.New("newline in subsection name")
	}
	return unquoteValue(`"` + s + `"`)
}

// Bool reads a boolean as gcfg does; where names the key for the error.
func Bool(where, value string) (bool, error) {
	switch strings.ToLower(value) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0", "":
		return false, nil
	}
	return false, fmt.Errorf("%s: %q is not a boolean (true or false)", where, value)
}
