package openstack

import (
	"encoding/json"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// object is a resource as its JSON object, for generic filtering.
type object = map[string]any

// toObject turns a resource into its JSON object.
func toObject(v any) object {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err) // resources are plain structs
	}
	var o object
	if err := json.Unmarshal(raw, &o); err != nil {
		panic(err)
	}
	return o
}

// special filters a collection interprets itself (Neutron's fixed_ips).
type special map[string]func(o object, vals []string) (bool, error)

// filterObjects keeps the objects that match every filter of q, the way
// Neutron and Octavia filter: a parameter names an attribute and several
// values of it match any; tags, tags-any, not-tags and not-tags-any filter
// the tags list. A parameter that names no filterable attribute is a 400,
// never ignored. fields (when present) selects the attributes returned.
func filterObjects(objs []object, q url.Values, sp special, attrErr func(string) error) ([]object, error) {
	var fields []string
	if fs, ok := q["fields"]; ok {
		fields = fs
		delete(q, "fields")
	}
	for _, k := range []string{"sort_key", "sort_dir"} {
		if _, ok := q[k]; ok {
			return nil, badRequest("sorting (%s) is not supported by minicloud; lists are in ID order", k)
		}
	}
	var out []object
	for _, o := range objs {
		ok, err := matchObject(o, q, sp, attrErr)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, o)
		}
	}
	if len(fields) > 0 {
		for i, o := range out {
			sel := object{}
			for _, f := range fields {
				if v, ok := o[f]; ok {
					sel[f] = v
				}
			}
			out[i] = sel
		}
	}
	return out, nil
}

func matchObject(o object, q url.Values, sp special, attrErr func(string) error) (bool, error) {
	for k, vals := range q {
		if f := sp[k]; f != nil {
			ok, err := f(o, vals)
			if err != nil || !ok {
				return false, err
			}
			continue
		}
		switch k {
		case "tags", "tags-any", "not-tags", "not-tags-any":
			ok, err := matchTags(o, k, vals, attrErr)
			if err != nil || !ok {
				return false, err
			}
			continue
		}
		v, present := o[k]
		if !present {
			return false, attrErr(k)
		}
		ok, err := matchValue(k, v, vals)
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

func matchValue(k string, v any, vals []string) (bool, error) {
	for _, want := range vals {
		switch v := v.(type) {
		case string:
			if v == want {
				return true, nil
			}
		case nil:
			if want == "" {
				return true, nil
			}
		case bool:
			b, err := strconv.ParseBool(want)
			if err != nil {
				return false, badRequest("filter %s: %q is not a boolean", k, want)
			}
			if b == v {
				return true, nil
			}
		case float64:
			n, err := strconv.ParseFloat(want, 64)
			if err != nil {
				return false, badRequest("filter %s: %q is not a number", k, want)
			}
			if n == v {
				return true, nil
			}
		default:
			return false, badRequest("[%s] is invalid attribute for filtering", k)
		}
	}
	return false, nil
}

// matchTags applies a tags filter: comma-separated tags, all (tags) or any
// (tags-any) present, or not (not-tags, not-tags-any).
func matchTags(o object, k string, vals []string, attrErr func(string) error) (bool, error) {
	raw, ok := o["tags"].([]any)
	if !ok {
		if _, present := o["tags"]; !present {
			return false, attrErr(k)
		}
	}
	var have []string
	for _, t := range raw {
		if s, ok := t.(string); ok {
			have = append(have, s)
		}
	}
	var want []string
	for _, v := range vals {
		want = append(want, strings.Split(v, ",")...)
	}
	all, anyOf := true, false
	for _, t := range want {
		if slices.Contains(have, t) {
			anyOf = true
		} else {
			all = false
		}
	}
	switch k {
	case "tags":
		return all, nil
	case "tags-any":
		return anyOf, nil
	case "not-tags":
		return !all, nil
	}
	return !anyOf, nil
}
