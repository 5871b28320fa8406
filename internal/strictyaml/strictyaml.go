package strictyaml

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/pkg/echo"
)

// Unmarshal decodes the YAML document data into v, a non-nil pointer, as
// sigs.k8s.io/yaml.UnmarshalStrict does. A YAML syntax error or a duplicate key is
// returned as the YAML parser reports it (with its line); any other failure
// becomes one error per bad value, joined, each naming the value's YAML path
// (e.g. `providers[1].budget.rate: want a number, got "fast"`).
func Unmarshal(data []byte, v any) error {
	decodeErr := yaml.UnmarshalStrict(data, v)
	if decodeErr == nil {
		return nil
	}
	js, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return decodeErr // the parser's own message names the line
	}
	t := reflect.TypeOf(v)
	if t == nil || t.Kind() != reflect.Pointer {
		return decodeErr
	}
	if errs := locate(js, t.Elem(), t.Elem(), ""); len(errs) > 0 {
		return errors.Join(errs...)
	}
	return decodeErr
}

// pathError is one value that does not decode.
type pathError struct {
	path, msg string
}

func (e *pathError) Error() string {
	if e.path == "" {
		return "document: " + e.msg
	}
	return e.path + ": " + e.msg
}

// locate returns an error for every value under raw (the JSON form of the YAML
// at path) that does not decode into a t, following encoding/json's rules.
//
// yt is the type sigs.k8s.io/yaml converts the value against before the JSON
// decoder sees it: it turns a YAML number or boolean into a string where yt is a
// string. It follows the document's keys through yt as encoding/json would,
// except that for a field promoted from an embedded struct it takes the embedded
// struct itself, and below a value whose yt is not a struct, slice or map it
// has none (nil): there, for example under the fields of an inline TypeMeta or
// of an inline embedded config, a number given for a string fails.
func locate(raw json.RawMessage, t, yt reflect.Type, path string) []error {
	yt = yamlTarget(yt)
	if isNull(raw) {
		// null leaves a pointer nil and any other value untouched, except that a
		// non-pointer unmarshaler is called with it.
		if t.Kind() == reflect.Pointer {
			return nil
		}
		return decodeLeaf(raw, t, yt, path)
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if isCustom(t) {
		return decodeLeaf(raw, t, yt, path)
	}
	switch t.Kind() {
	case reflect.Struct:
		obj, ok := object(raw)
		if !ok {
			return decodeLeaf(raw, t, yt, path)
		}
		var errs []error
		for _, key := range sortedKeys(obj) {
			ft, _, ok := fieldType(t, key)
			if !ok {
				errs = append(errs, &pathError{join(path, key), "unknown field"})
				continue
			}
			var fyt reflect.Type
			if yt != nil && yt.Kind() == reflect.Struct {
				_, fyt, _ = fieldType(yt, key)
			}
			errs = append(errs, locate(obj[key], ft, fyt, join(path, key))...)
		}
		return errs
	case reflect.Map:
		obj, ok := object(raw)
		if !ok || t.Key().Kind() != reflect.String {
			return decodeLeaf(raw, t, yt, path)
		}
		var eyt reflect.Type
		if yt != nil && yt.Kind() == reflect.Map {
			eyt = yt.Elem()
		}
		var errs []error
		for _, key := range sortedKeys(obj) {
			errs = append(errs, locate(obj[key], t.Elem(), eyt, join(path, key))...)
		}
		return errs
	case reflect.Slice, reflect.Array:
		var list []json.RawMessage
		if t.Elem().Kind() == reflect.Uint8 || json.Unmarshal(raw, &list) != nil {
			return decodeLeaf(raw, t, yt, path)
		}
		var eyt reflect.Type
		if yt != nil && yt.Kind() == reflect.Slice {
			eyt = yt.Elem()
		}
		var errs []error
		for i, item := range list {
			errs = append(errs, locate(item, t.Elem(), eyt, fmt.Sprintf("%s[%d]", path, i))...)
		}
		return errs
	}
	return decodeLeaf(raw, t, yt, path)
}

// yamlTarget resolves yt as sigs.k8s.io/yaml does before it looks at a value:
// through pointers, and to none (nil) for a type that decodes itself.
func yamlTarget(yt reflect.Type) reflect.Type {
	for yt != nil && yt.Kind() == reflect.Pointer {
		yt = yt.Elem()
	}
	if yt != nil && isCustom(yt) {
		return nil
	}
	return yt
}

// decodeLeaf decodes raw, converted as sigs.k8s.io/yaml converts it for yt,
// into a fresh t and describes the failure, if any.
func decodeLeaf(raw json.RawMessage, t, yt reflect.Type, path string) []error {
	if yt != nil && yt.Kind() == reflect.String && isScalarNonString(raw) {
		raw = json.RawMessage(strconv.Quote(string(raw)))
	}
	err := json.Unmarshal(raw, reflect.New(t).Interface())
	if err == nil {
		return nil
	}
	var msg string
	var typeErr *json.UnmarshalTypeError
	switch {
	case t == durationType && raw[0] == '"':
		msg = fmt.Sprintf("invalid duration %s: %v", describe(raw), err)
	case t == durationType:
		msg = fmt.Sprintf(`want a duration such as "30s", got %s`, describe(raw))
	case isCustom(t):
		msg = fmt.Sprintf("invalid value %s: %v", describe(raw), err)
	case errors.As(err, &typeErr):
		msg = fmt.Sprintf("want %s, got %s", kind(t), describe(raw))
	default:
		msg = err.Error()
	}
	return []error{&pathError{path, msg}}
}

var (
	durationType        = reflect.TypeFor[metav1.Duration]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// isScalarNonString reports whether raw is a JSON number or boolean.
func isScalarNonString(raw json.RawMessage) bool {
	return raw[0] == 't' || raw[0] == 'f' || isNumber(raw)
}

// isCustom reports whether encoding/json leaves decoding a t to the type itself.
func isCustom(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return p.Implements(jsonUnmarshalerType) || p.Implements(textUnmarshalerType)
}

// fieldType finds the field of struct t that encoding/json decodes key into: the
// exact name first, then a case-insensitive match; fields of embedded structs
// without a JSON name are promoted, shallower ones first. top is the type of
// t's own field that holds it: the field's type, or for a promoted field the
// embedded struct's (what sigs.k8s.io/yaml converts the value against).
func fieldType(t reflect.Type, key string) (ft, top reflect.Type, ok bool) {
	// A struct to search, and the field of t it is reached through (nil for
	// t itself).
	type embedded struct{ st, top reflect.Type }
	var folded, foldedTop reflect.Type
	level := []embedded{{st: t}}
	seen := map[reflect.Type]bool{}
	for len(level) > 0 && folded == nil {
		var next []embedded
		for _, e := range level {
			if seen[e.st] {
				continue
			}
			seen[e.st] = true
			for i := range e.st.NumField() {
				sf := e.st.Field(i)
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				via := e.top
				if via == nil {
					via = sf.Type
				}
				name, _, _ := strings.Cut(tag, ",")
				if sf.Anonymous && name == "" {
					et := sf.Type
					if et.Kind() == reflect.Pointer {
						et = et.Elem()
					}
					if et.Kind() == reflect.Struct {
						next = append(next, embedded{st: et, top: via})
						continue
					}
				}
				if !sf.IsExported() {
					continue
				}
				if name == "" {
					name = sf.Name
				}
				if name == key {
					return sf.Type, via, true
				}
				if folded == nil && strings.EqualFold(name, key) {
					folded, foldedTop = sf.Type, via
				}
			}
		}
		level = next
	}
	return folded, foldedTop, folded != nil
}

// kind says in YAML terms what a value of type t must look like.
func kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		return fmt.Sprintf("an integer from %d to %d", int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprintf("an integer from 0 to %d", uint64(math.MaxUint64)>>(64-t.Bits()))
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Struct, reflect.Map:
		return "a mapping"
	}
	return t.String()
}

// describe renders a JSON value as the error repeats it: scalars as written
// (long strings shortened), lists and mappings by their kind.
func describe(raw json.RawMessage) string {
	switch raw[0] {
	case '[':
		return "a list"
	case '{':
		return "a mapping"
	case '"':
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return echo.Quote(s, echo.MaxValue)
		}
	}
	return echo.Shorten(string(raw), echo.MaxValue)
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(raw, []byte("null")) }

func isNumber(raw json.RawMessage) bool { return raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9') }

// object decodes raw as a JSON object; false when it is something else.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if raw[0] != '{' {
		return nil, false
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, false
	}
	return obj, true
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
