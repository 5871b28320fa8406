package manager

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// jsonKeys returns the dotted JSON paths of t's fields under prefix,
// recursing into structs (and pointers, slices and inline embeddings of them);
// Kubernetes types are leaves.
func jsonKeys(t reflect.Type, prefix string, seen map[reflect.Type]bool) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] || strings.HasPrefix(t.PkgPath(), "k8s.io/") {
		return nil
	}
	seen[t] = true
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		path := prefix
		if name != "" {
			path = prefix + name
			keys = append(keys, path)
			path += "."
		}
		keys = append(keys, jsonKeys(f.Type, path, seen)...)
	}
	return keys
}

// TestConfigFieldsDocumented: docs/configuration.md names every field of the
// --config file (ManagerConfig, its provider composition and the controller
// settings), so the reference cannot fall behind the code.
func TestConfigFieldsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	keys := jsonKeys(reflect.TypeFor[Config](), "", map[reflect.Type]bool{})
	if len(keys) < 20 {
		t.Fatalf("found only %d keys (%v): the walk is broken", len(keys), keys)
	}
	// A field is named by its path (`service.nodeUpdateWindow`), as the
	// start of a documented path (`service.`), or, in the tables of the
	// providers[] entries and their budget, by its own name.
	for _, path := range keys {
		leaf := path[strings.LastIndex(path, ".")+1:]
		if !strings.Contains(string(doc), "`"+path+"`") && !strings.Contains(string(doc), "`"+path+".") &&
			!(strings.HasPrefix(path, "providers.") && strings.Contains(string(doc), "`"+leaf+"`")) {
			t.Errorf("docs/configuration.md does not name the --config field %s", path)
		}
	}
}
