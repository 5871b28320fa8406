package strictyaml_test

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/yaml"

	"github.com/stratus-ccm/stratus/internal/strictyaml"
)

type inner struct {
	Period *metav1.Duration `json:"period,omitempty"`
	Count  int              `json:"count,omitempty"`
	Ratio  float64          `json:"ratio,omitempty"`
	Name   string           `json:"name,omitempty"`
	On     bool             `json:"enabled,omitempty"`
}

type embedded struct {
	Kind  string  `json:"kind,omitempty"`
	Parts []inner `json:"parts,omitempty"`
}

type doc struct {
	embedded `json:",inline"`
	Settings inner             `json:"settings,omitempty"`
	Items    []inner           `json:"items,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
	Window   metav1.Duration   `json:"window,omitempty"`
	Small    int8              `json:"small,omitempty"`
}

func TestUnmarshalNamesThePath(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // each a whole line of the error
	}{
		{"bad duration unit", "settings: {period: 1x}\n", []string{`settings.period: invalid duration "1x": time: unknown unit "x" in duration "1x"`}},
		{"duration not a string", "settings: {period: 5}\n", []string{`settings.period: want a duration such as "30s", got 5`}},
		{"non-pointer duration", "window: soon\n", []string{`window: invalid duration "soon": time: invalid duration "soon"`}},
		{"string for int", "settings: {count: ten}\n", []string{`settings.count: want an integer from -9223372036854775808 to 9223372036854775807, got "ten"`}},
		{"fraction for int", "items: [{}, {count: 1.5}]\n", []string{`items[1].count: want an integer from -9223372036854775808 to 9223372036854775807, got 1.5`}},
		{"out of range", "small: 300\n", []string{`small: want an integer from -128 to 127, got 300`}},
		{"string for float", "items: [{ratio: fast}]\n", []string{`items[0].ratio: want a number, got "fast"`}},
		{"list for string", "items: [{name: [a]}]\n", []string{`items[0].name: want a string, got a list`}},
		{"string for bool", "settings: {enabled: maybe}\n", []string{`settings.enabled: want true or false, got "maybe"`}},
		{"scalar for mapping", "settings: 5\n", []string{`settings: want a mapping, got 5`}},
		{"mapping for list", "items: {a: b}\n", []string{`items: want a list, got a mapping`}},
		{"map value", "labels: {a: [x]}\n", []string{`labels.a: want a string, got a list`}},
		{"unknown nested field", "items: [{perod: 1s}]\n", []string{`items[0].perod: unknown field`}},
		{"unknown top-level field", "kinds: x\n", []string{`kinds: unknown field`}},
		{"number for a promoted string", "kind: 5\n", []string{`kind: want a string, got 5`}},
		{"boolean for a promoted string, other case", "Kind: true\n", []string{`Kind: want a string, got true`}},
		{"top level not a mapping", "[1]\n", []string{`document: want a mapping, got a list`}},
		// Below a promoted field sigs.k8s.io/yaml converts nothing.
		{"number for a string under a promoted field", "parts: [{name: 0}]\n", []string{`parts[0].name: want a string, got 0`}},
		{"boolean for a string under a promoted field", "parts: [{}, {name: false}]\n", []string{`parts[1].name: want a string, got false`}},
		{
			name: "every problem",
			yaml: "settings: {period: 1x, count: ten}\nitems: [{ratio: x}]\n",
			want: []string{
				`items[0].ratio: want a number, got "x"`,
				`settings.count: want an integer from -9223372036854775808 to 9223372036854775807, got "ten"`,
				`settings.period: invalid duration "1x": time: unknown unit "x" in duration "1x"`,
			},
		},
		{"long value shortened", "settings: {count: " + strings.Repeat("y", 100) + "}\n", []string{
			`settings.count: want an integer from -9223372036854775808 to 9223372036854775807, got "` + strings.Repeat("y", 64) + `"...[100 bytes]`,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := strictyaml.Unmarshal([]byte(tc.yaml), &d)
			if err == nil {
				t.Fatalf("Unmarshal accepted %q", tc.yaml)
			}
			if got := strings.Split(err.Error(), "\n"); !equal(got, tc.want) {
				t.Errorf("error lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestUnmarshalDecodesAsSigsYAML(t *testing.T) {
	// Numbers and booleans for a string, null for a pointer, case-insensitive
	// keys and promoted fields are accepted, as sigs.k8s.io/yaml accepts them.
	var d doc
	in := "Kind: x\nsettings: {name: 5, period: null, count: 3}\nitems: [{name: true, period: 2s}]\nwindow: 1m\n"
	if err := strictyaml.Unmarshal([]byte(in), &d); err != nil {
		t.Fatalf("Unmarshal: %v", err)
	}
	if d.Kind != "x" || d.Settings.Name != "5" || d.Settings.Period != nil || d.Settings.Count != 3 ||
		d.Items[0].Name != "true" || d.Items[0].Period.Duration != 2*time.Second || d.Window.Duration != time.Minute {
		t.Errorf("decoded %+v", d)
	}
}

func TestUnmarshalKeepsParserErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"syntax", "\t{", "yaml: "},
		{"duplicate key", "kind: a\nkind: b\n", `key "kind" already set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d doc
			err := strictyaml.Unmarshal([]byte(tc.yaml), &d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Unmarshal = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// FuzzUnmarshal: no document panics, Unmarshal accepts exactly what
// sigs.k8s.io/yaml.UnmarshalStrict accepts, and every failure that is not the
// YAML parser's is found by the walk (the decoder's own path-less message never
// comes through). Seeds are in testdata/fuzz/FuzzUnmarshal.
func FuzzUnmarshal(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var d, ref doc
		err := strictyaml.Unmarshal(data, &d)
		refErr := yaml.UnmarshalStrict(data, &ref)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("Unmarshal = %v, sigs.k8s.io/yaml = %v", err, refErr)
		}
		if err == nil {
			return
		}
		if _, perr := yaml.YAMLToJSONStrict(data); perr == nil && strings.Contains(err.Error(), "error unmarshaling JSON") {
			t.Fatalf("the walk found no bad value for a failed decode: %v", err)
		}
	})
}
