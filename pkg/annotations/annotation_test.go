package annotations

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func objWith(ann map[string]string) *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: "web", Namespace: "default", Annotations: ann}
}

// TestDurationKey: a key without a registry default gives the zero value
// (the provider's default) when absent or invalid.
func TestDurationKey(t *testing.T) {
	name := LBHealthCheckInterval.Name
	tests := []struct {
		desc    string
		ann     map[string]string
		want    time.Duration
		wantSet bool
		wantErr bool
	}{
		{desc: "absent: the provider's default"},
		{desc: "valid", ann: map[string]string{name: "30s"}, want: 30 * time.Second, wantSet: true},
		{desc: "lower bound", ann: map[string]string{name: "1s"}, want: time.Second, wantSet: true},
		{desc: "below range", ann: map[string]string{name: "500ms"}, want: 0, wantSet: true, wantErr: true},
		{desc: "above range", ann: map[string]string{name: "6m"}, want: 0, wantSet: true, wantErr: true},
		{desc: "not a duration", ann: map[string]string{name: "10"}, want: 0, wantSet: true, wantErr: true},
		{desc: "empty", ann: map[string]string{name: ""}, want: 0, wantSet: true, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			got, set, err := LBHealthCheckInterval.Get(objWith(tt.ann))
			if got != tt.want || set != tt.wantSet || (err != nil) != tt.wantErr {
				t.Fatalf("Get = %v, %v, %v; want %v, %v, err=%v", got, set, err, tt.want, tt.wantSet, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
			if err != nil && !strings.Contains(err.Error(), name) {
				t.Errorf("error %q does not name the annotation", err)
			}
		})
	}
}

// TestStringKeyDefault: a key with a registry default gives it when absent
// or invalid, and rejects values outside its list naming them.
func TestStringKeyDefault(t *testing.T) {
	name := LBAlgorithm.Name
	for _, tc := range []struct {
		ann     map[string]string
		want    string
		wantErr string
	}{
		{ann: nil, want: AlgorithmRoundRobin},
		{ann: map[string]string{name: AlgorithmSourceIP}, want: AlgorithmSourceIP},
		{ann: map[string]string{name: "least-connections"}, want: AlgorithmRoundRobin,
			wantErr: `invalid annotation ` + name + `="least-connections": not one of round-robin, source-ip`},
	} {
		got, _, err := LBAlgorithm.Get(objWith(tc.ann))
		if got != tc.want || fmt.Sprint(err) != cmp.Or(tc.wantErr, "<nil>") {
			t.Errorf("Get(%v) = %q, %v; want %q, %s", tc.ann, got, err, tc.want, cmp.Or(tc.wantErr, "<nil>"))
		}
	}
}

// TestParseErrors: each rejection says why, naming the annotation; a value with
// white space around it is rejected, and a number or duration too large for its
// type is "outside" the accepted range, not "not an integer".
func TestParseErrors(t *testing.T) {
	interval, threshold, proxy := LBHealthCheckInterval.Name, LBHealthCheckUnhealthyThreshold.Name, LBProxyProtocol.Name
	for _, tc := range []struct {
		parse func(string) error
		raw   string
		want  string
	}{
		{ignoreValue(LBHealthCheckUnhealthyThreshold.Parse), "99999999999999999999",
			`invalid annotation ` + threshold + `="99999999999999999999": number is outside [1, 10]`},
		{ignoreValue(LBHealthCheckUnhealthyThreshold.Parse), "-99999999999999999999",
			`invalid annotation ` + threshold + `="-99999999999999999999": number is outside [1, 10]`},
		{ignoreValue(LBHealthCheckUnhealthyThreshold.Parse), "11", `invalid annotation ` + threshold + `="11": 11 is outside [1, 10]`},
		{ignoreValue(LBHealthCheckUnhealthyThreshold.Parse), "ten", `invalid annotation ` + threshold + `="ten": not an integer`},
		{ignoreValue(LBHealthCheckUnhealthyThreshold.Parse), " 5", `invalid annotation ` + threshold + `=" 5": leading or trailing white space`},
		{ignoreValue(LBHealthCheckInterval.Parse), " 5s", `invalid annotation ` + interval + `=" 5s": leading or trailing white space`},
		{ignoreValue(LBHealthCheckInterval.Parse), "5s\n", `invalid annotation ` + interval + `="5s\n": leading or trailing white space`},
		{ignoreValue(LBHealthCheckInterval.Parse), "9999999999999h", `invalid annotation ` + interval + `="9999999999999h": duration is outside [1s, 5m0s]`},
		{ignoreValue(LBHealthCheckInterval.Parse), "s", `invalid annotation ` + interval + `="s": not a duration (e.g. 10s, 1m30s)`},
		{ignoreValue(LBHealthCheckInterval.Parse), "6m", `invalid annotation ` + interval + `="6m": 6m0s is outside [1s, 5m0s]`},
		{ignoreValue(LBProxyProtocol.Parse), "true ", `invalid annotation ` + proxy + `="true ": leading or trailing white space`},
	} {
		err := tc.parse(tc.raw)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q) = %v, want %s", tc.raw, err, tc.want)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) error does not match ErrInvalid", tc.raw)
		}
	}
}

// TestInvalidErrorShortensEchoes: a long value and a long name are repeated
// only in part, each with a marker giving its length, so that a 30 kB value
// never reaches a condition or an event whole.
func TestInvalidErrorShortensEchoes(t *testing.T) {
	long := strings.Repeat("v", 30000)
	name := Prefix + strings.Repeat("n", 200)
	err := Validate(objWith(map[string]string{name: long, LBHealthCheckInterval.Name: "é" + long}))
	want := "invalid annotation " + LBHealthCheckInterval.Name + `="é` + strings.Repeat("v", 62) + `"...[30002 bytes]: not a duration (e.g. 10s, 1m30s)` + "\n" +
		"invalid annotation " + name[:128] + "...[219 bytes]=" + `"` + strings.Repeat("v", 64) + `"...[30000 bytes]: unknown stratus annotation`
	if err == nil || err.Error() != want {
		t.Fatalf("Validate = %v\nwant %s", err, want)
	}
	if got := InvalidNames(err); len(got) != 2 || got[1] != name {
		t.Errorf("InvalidNames = %v; want the names whole", got)
	}
}

func ignoreValue[T any](parse func(string) (T, error)) func(string) error {
	return func(s string) error { _, err := parse(s); return err }
}

func TestIntAndBoolKeys(t *testing.T) {
	tests := []struct {
		raw     string
		want    int
		wantErr bool
	}{{"1", 1, false}, {"10", 10, false}, {"0", 0, true}, {"11", 0, true}, {"x", 0, true}, {"-3", 0, true}}
	for _, tt := range tests {
		got, err := LBHealthCheckUnhealthyThreshold.Parse(tt.raw)
		if (err != nil) != tt.wantErr || (err == nil && got != tt.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v, err=%v", tt.raw, got, err, tt.want, tt.wantErr)
		}
	}
	for raw, want := range map[string]bool{"true": true, "false": false, "1": true, "F": false} {
		if got, err := LBProxyProtocol.Parse(raw); err != nil || got != want {
			t.Errorf("Parse(%q) = %v, %v; want %v", raw, got, err, want)
		}
	}
	if _, err := LBProxyProtocol.Parse("yes"); err == nil {
		t.Error(`Parse("yes") succeeded; want error`)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		desc string
		ann  map[string]string
		want []string // names reported invalid
	}{
		{desc: "none"},
		{desc: "foreign annotations ignored", ann: map[string]string{"example.com/x": "??", "service.beta.kubernetes.io/foo": "1"}},
		{desc: "all valid", ann: map[string]string{LBHealthCheckInterval.Name: "5s", LBProxyProtocol.Name: "true"}},
		{desc: "one invalid", ann: map[string]string{LBHealthCheckInterval.Name: "soon", LBProxyProtocol.Name: "true"},
			want: []string{LBHealthCheckInterval.Name}},
		{desc: "two invalid, name order", ann: map[string]string{LBProxyProtocol.Name: "maybe", LBHealthCheckInterval.Name: "soon"},
			want: []string{LBHealthCheckInterval.Name, LBProxyProtocol.Name}},
		{desc: "unknown key under prefix", ann: map[string]string{Prefix + "load-balancer-helth-check-interval": "5s"},
			want: []string{Prefix + "load-balancer-helth-check-interval"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := Validate(objWith(tt.ann))
			if diff := gocmp.Diff(tt.want, InvalidNames(err)); diff != "" {
				t.Errorf("invalid names (-want +got):\n%s", diff)
			}
			if (err != nil) != (len(tt.want) > 0) {
				t.Errorf("Validate = %v", err)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Errorf("Validate error %v does not match ErrInvalid", err)
			}
		})
	}
}

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, i := range All() {
		if seen[i.Name] {
			t.Errorf("%s registered twice", i.Name)
		}
		seen[i.Name] = true
		if i.Description == "" || i.Type == "" || i.Example == "" {
			t.Errorf("%s lacks documentation: %+v", i.Name, i)
		}
		if err := Validate(objWith(map[string]string{i.Name: i.Example})); err != nil {
			t.Errorf("example of %s invalid: %v", i.Name, err)
		}
	}
}

// TestDocsUpToDate fails when docs/annotations.md differs from the registry.
func TestDocsUpToDate(t *testing.T) {
	const path = "../../docs/annotations.md"
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `go run ./pkg/annotations/internal/gen` from the repository root", err)
	}
	if !bytes.Equal(got, Markdown()) {
		t.Fatalf("%s is stale: run `go run ./pkg/annotations/internal/gen` from the repository root", path)
	}
}

// FuzzValidate checks that no value of any stratus annotation makes the parsers
// panic, and that every accepted value is accepted again (parsing is deterministic)
// while every rejected value is reported under the right name.
func FuzzValidate(f *testing.F) {
	for _, i := range All() {
		f.Add(i.Name, i.Example)
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		obj := objWith(map[string]string{name: value})
		err := Validate(obj)
		if err == nil {
			if err2 := Validate(obj); err2 != nil {
				t.Fatalf("second validation of %s=%q failed: %v", name, value, err2)
			}
			return
		}
		if !strings.HasPrefix(name, Prefix) {
			t.Fatalf("foreign annotation %q rejected: %v", name, err)
		}
		if names := InvalidNames(err); len(names) != 1 || names[0] != name {
			t.Fatalf("Validate(%s=%q) names %v", name, value, names)
		}
	})
}

// TestValidateRelations: a misspelt key names the closest known one (and
// a name far from every key names none), two keys that exclude each other
// are an error on the declaring key, a timeout longer than its interval is
// an error naming both, and a deprecated key is a warning, not an error.
func TestValidateRelations(t *testing.T) {
	interval, timeout := LBHealthCheckInterval.Name, LBHealthCheckTimeout.Name
	for _, tc := range []struct {
		desc string
		ann  map[string]string
		want string
	}{
		{"typo", map[string]string{Prefix + "load-balancer-helth-check-interval": "5s"},
			`invalid annotation ` + Prefix + `load-balancer-helth-check-interval="5s": unknown stratus annotation; did you mean ` + interval + `?`},
		{"cut short", map[string]string{Prefix + "load-balancer-proxy": "true"},
			`invalid annotation ` + Prefix + `load-balancer-proxy="true": unknown stratus annotation; did you mean ` + LBProxyProtocol.Name + `?`},
		{"nothing close", map[string]string{Prefix + "colour": "blue"},
			`invalid annotation ` + Prefix + `colour="blue": unknown stratus annotation`},
		{"timeout longer than interval", map[string]string{interval: "2s", timeout: "3s"},
			`invalid annotation ` + timeout + `="3s": longer than ` + interval + ` (2s): a probe must end before the next one starts`},
		{"timeout equal to interval", map[string]string{interval: "3s", timeout: "3s"}, ""},
		{"invalid interval: no relation check", map[string]string{interval: "soon", timeout: "3s"},
			`invalid annotation ` + interval + `="soon": not a duration (e.g. 10s, 1m30s)`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := Validate(objWith(tc.ann))
			if got := fmt.Sprint(err); got != cmp.Or(tc.want, "<nil>") {
				t.Errorf("Validate = %s\nwant %s", got, cmp.Or(tc.want, "<nil>"))
			}
		})
	}

	// Exclusions and deprecations, on a registry of their own: stratus's
	// has neither today.
	a := &Key[bool]{Info: Info{Name: Prefix + "a", Example: "true", Excludes: []string{Prefix + "b"}}, parse: parseBool}
	b := &Key[bool]{Info: Info{Name: Prefix + "b", Example: "true", Deprecated: "use " + Prefix + "a"}, parse: parseBool}
	reg := []entry{{info: &a.Info, validate: func(s string) error { _, err := a.Parse(s); return err }},
		{info: &b.Info, validate: func(s string) error { _, err := b.Parse(s); return err }}}
	both := map[string]string{Prefix + "a": "true", Prefix + "b": "false"}
	if got, want := fmt.Sprint(validate(both, reg, nil)), `invalid annotation `+Prefix+`a="true": excludes `+Prefix+`b: set one of them`; got != want {
		t.Errorf("validate(a and b) = %s\nwant %s", got, want)
	}
	if err := validate(map[string]string{Prefix + "b": "true"}, reg, nil); err != nil {
		t.Errorf("validate(deprecated b) = %v; want no error", err)
	}
	if got, want := warnings(both, reg), []string{"metadata.annotations[" + Prefix + "b]: deprecated: use " + Prefix + "a"}; !slices.Equal(got, want) {
		t.Errorf("warnings = %q; want %q", got, want)
	}
	if got := warnings(map[string]string{Prefix + "a": "true"}, reg); got != nil {
		t.Errorf("warnings(a) = %q; want none", got)
	}
}
