package annotations

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stratus-ccm/stratus/pkg/echo"
)

// Prefix starts the name of every stratus Service annotation.
const Prefix = "service.stratus.io/"

// ErrInvalid is matched (errors.Is) by every error about an annotation's value.
var ErrInvalid = errors.New("invalid annotation")

// InvalidError says which annotation has which unusable value, and why.
type InvalidError struct {
	// Name is the annotation's name.
	Name string
	// Value is the value found on the object.
	Value string
	// Err is the reason the value was rejected.
	Err error
}

// Error names the annotation and repeats its value, each shortened (with a
// marker giving the original length) when long: a value may be hundreds of
// kilobytes, and the message ends up in conditions, events and logs.
func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid annotation %s=%s: %v", echo.Shorten(e.Name, echo.MaxName), echo.Quote(e.Value, echo.MaxValue), e.Err)
}

// Unwrap returns the reason.
func (e *InvalidError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// Info documents one annotation.
type Info struct {
	// Name is the annotation key.
	Name string
	// Type names the value's type in the documentation ("duration", "integer", ...).
	Type string
	// Default is the value used when the annotation is absent, as a string.
	Default string
	// Range describes the accepted values beyond the type, for the documentation.
	Range string
	// Description says what the annotation does, for the documentation.
	Description string
	// Example is a valid value.
	Example string
	// Deprecated, when set, says what to use instead: the annotation still
	// works, and the admission webhook warns (Warnings) instead of
	// rejecting it.
	Deprecated string
	// Excludes names annotations that must not be set together with this
	// one (each pair is declared on one side).
	Excludes []string
}

// Key is a typed annotation: its documentation and its parser.
type Key[T any] struct {
	Info
	parse func(string) (T, error)
	def   T
}

// Get returns the annotation's value on obj: ok is false (and v the default) when
// it is absent; err is an *InvalidError when its value does not parse.
func (k *Key[T]) Get(obj metav1.Object) (v T, ok bool, err error) {
	raw, ok := obj.GetAnnotations()[k.Name]
	if !ok {
		return k.def, false, nil
	}
	v, err = k.Parse(raw)
	if err != nil {
		return k.def, true, err
	}
	return v, true, nil
}

// Parse parses a value of the annotation; errors are *InvalidError. A value with
// leading or trailing white space is invalid: it is a typo or a templating
// mistake, and the annotation must mean the same to every reader.
func (k *Key[T]) Parse(raw string) (T, error) {
	var v T
	var err error
	if strings.TrimSpace(raw) != raw {
		err = errors.New("leading or trailing white space")
	} else {
		v, err = k.parse(raw)
	}
	if err != nil {
		return v, &InvalidError{Name: k.Name, Value: raw, Err: err}
	}
	return v, nil
}

// entry is what the registry keeps of a key, independent of its value type.
type entry struct {
	info     *Info
	validate func(string) error
}

var registry []entry

func register[T any](k *Key[T]) *Key[T] {
	if !strings.HasPrefix(k.Name, Prefix) {
		panic("annotation " + k.Name + " lacks prefix " + Prefix)
	}
	if _, err := k.Parse(k.Example); err != nil {
		panic(fmt.Sprintf("example of %s: %v", k.Name, err))
	}
	if k.Default != "" {
		def, err := k.Parse(k.Default)
		if err != nil {
			panic(fmt.Sprintf("default of %s: %v", k.Name, err))
		}
		k.def = def
	}
	registry = append(registry, entry{info: &k.Info, validate: func(s string) error {
		_, err := k.Parse(s)
		return err
	}})
	slices.SortFunc(registry, func(a, b entry) int { return strings.Compare(a.info.Name, b.info.Name) })
	return k
}

// All returns the documentation of every registered annotation, sorted by name.
func All() []Info {
	out := make([]Info, len(registry))
	for i, e := range registry {
		out[i] = *e.info
	}
	return out
}

// Validate checks every stratus annotation present on obj and returns the errors
// (*InvalidError, joined, in name order), or nil when all are valid. Unknown keys
// under Prefix are errors too, naming the closest known key: a typo must not be
// silently ignored. So are two annotations that exclude each other, and
// relations between values the registry knows (a health-check timeout longer
// than its interval).
func Validate(obj metav1.Object) error {
	return validate(obj.GetAnnotations(), registry, relations)
}

// relation is a check of several annotations' values together; it runs only
// when each of its keys is present and valid.
type relation struct {
	keys  []string
	check func(ann map[string]string) error
}

// relations are the registry's checks across keys.
var relations = []relation{{
	keys: []string{LBHealthCheckInterval.Name, LBHealthCheckTimeout.Name},
	check: func(ann map[string]string) error {
		interval, _ := LBHealthCheckInterval.Parse(ann[LBHealthCheckInterval.Name])
		timeout, _ := LBHealthCheckTimeout.Parse(ann[LBHealthCheckTimeout.Name])
		if timeout > interval {
			return &InvalidError{Name: LBHealthCheckTimeout.Name, Value: ann[LBHealthCheckTimeout.Name],
				Err: fmt.Errorf("longer than %s (%v): a probe must end before the next one starts", LBHealthCheckInterval.Name, interval)}
		}
		return nil
	},
}}

func validate(ann map[string]string, reg []entry, rels []relation) error {
	var errs []error
	known := make(map[string]bool, len(reg))
	invalid := map[string]bool{}
	for _, e := range reg {
		known[e.info.Name] = true
		if raw, ok := ann[e.info.Name]; ok {
			if err := e.validate(raw); err != nil {
				errs = append(errs, err)
				invalid[e.info.Name] = true
			}
		}
	}
	for _, e := range reg {
		if _, ok := ann[e.info.Name]; !ok {
			continue
		}
		for _, other := range e.info.Excludes {
			if _, ok := ann[other]; ok {
				errs = append(errs, &InvalidError{Name: e.info.Name, Value: ann[e.info.Name],
					Err: fmt.Errorf("excludes %s: set one of them", other)})
			}
		}
	}
	for _, r := range rels {
		if slices.ContainsFunc(r.keys, func(k string) bool { _, ok := ann[k]; return !ok || invalid[k] }) {
			continue
		}
		if err := r.check(ann); err != nil {
			errs = append(errs, err)
		}
	}
	var unknown []string
	for name := range ann {
		if strings.HasPrefix(name, Prefix) && !known[name] {
			unknown = append(unknown, name)
		}
	}
	slices.Sort(unknown)
	for _, name := range unknown {
		msg := "unknown stratus annotation"
		if near := closest(name, reg); near != "" {
			msg += "; did you mean " + near + "?"
		}
		errs = append(errs, &InvalidError{Name: name, Value: ann[name], Err: errors.New(msg)})
	}
	return errors.Join(errs...)
}

// Closest returns the registered annotation whose name is nearest to name
// (fewest single-character edits), or "" when none is near enough to be
// what was meant.
func Closest(name string) string { return closest(name, registry) }

func closest(name string, reg []entry) string {
	best, bestDist := "", -1
	for _, e := range reg {
		if len(name) > len(Prefix) && strings.HasPrefix(e.info.Name, name) {
			return e.info.Name // cut short
		}
		if d := editDistance(name, e.info.Name); bestDist < 0 || d < bestDist {
			best, bestDist = e.info.Name, d
		}
	}
	// A third of the part after the prefix: a typo or two; anything further
	// is another annotation, not a misspelling.
	if bestDist < 0 || bestDist > max(2, (len(name)-len(Prefix))/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Warnings returns a warning for each deprecated annotation set on obj, in
// name order: they still work, so they are not errors.
func Warnings(obj metav1.Object) []string { return warnings(obj.GetAnnotations(), registry) }

func warnings(ann map[string]string, reg []entry) []string {
	var out []string
	for _, e := range reg {
		if _, ok := ann[e.info.Name]; ok && e.info.Deprecated != "" {
			out = append(out, fmt.Sprintf("metadata.annotations[%s]: deprecated: %s", e.info.Name, e.info.Deprecated))
		}
	}
	return out
}

// InvalidNames returns the names of the annotations err (from Validate or Get)
// complains about, in order.
func InvalidNames(err error) []string {
	var names []string
	var walk func(error)
	walk = func(err error) {
		var ie *InvalidError
		switch e := err.(type) {
		case nil:
		case interface{ Unwrap() []error }:
			for _, c := range e.Unwrap() {
				walk(c)
			}
		default:
			if errors.As(err, &ie) {
				names = append(names, ie.Name)
			}
		}
	}
	walk(err)
	return names
}

// Markdown renders the registry as the user documentation, docs/annotations.md.
func Markdown() []byte {
	var b bytes.Buffer
	b.WriteString("<!-- Generated by `go run ./pkg/annotations/internal/gen`; DO NOT EDIT. -->\n\n")
	b.WriteString("# Service annotations\n\n")
	b.WriteString("stratus's own annotations on `type: LoadBalancer` Services. The service controller\n")
	b.WriteString("validates them before it calls the cloud: an invalid value (or an unknown key under\n")
	b.WriteString("`" + Prefix + "`) leaves the load balancer as it is, sets the Service condition\n")
	b.WriteString("`LoadBalancerReady=False` with reason `InvalidConfiguration` and a Warning event\n")
	b.WriteString("`SyncLoadBalancerFailed`, both naming the annotation. The Service is retried when it\n")
	b.WriteString("changes. Providers read these values and their own annotations from the Service.\n")
	b.WriteString("With the admission webhook on (docs/loadbalancers.md), the same checks refuse such a\n")
	b.WriteString("Service before it is stored, and a misspelt key is told the closest known one.\n\n")
	b.WriteString("A value is read exactly as written: white space before or after it is an error, and a\n")
	b.WriteString("number or duration outside the accepted values (however large) is an error that gives\n")
	b.WriteString("the accepted range.\n\n")
	b.WriteString("| Annotation | Type | Default | Accepted values | Example |\n|---|---|---|---|---|\n")
	for _, i := range All() {
		def := i.Default
		if def == "" {
			def = "(provider's)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | `%s` |\n", i.Name, i.Type, def, i.Range, i.Example)
	}
	for _, i := range All() {
		fmt.Fprintf(&b, "\n## `%s`\n\n%s\n", i.Name, i.Description)
		if i.Deprecated != "" {
			fmt.Fprintf(&b, "\n**Deprecated:** %s\n", i.Deprecated)
		}
		if len(i.Excludes) > 0 {
			fmt.Fprintf(&b, "\nNot together with `%s`.\n", strings.Join(i.Excludes, "`, `"))
		}
	}
	return b.Bytes()
}

// durationSyntax matches what time.ParseDuration reads, whatever the magnitude.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

func durationIn(lo, hi time.Duration) func(string) (time.Duration, error) {
	return func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err != nil && durationSyntax.MatchString(s) {
			// Well-formed, so too long for a time.Duration (about 290 years).
			return 0, fmt.Errorf("duration is outside [%v, %v]", lo, hi)
		}
		if err != nil {
			return 0, fmt.Errorf("not a duration (e.g. 10s, 1m30s)")
		}
		if d < lo || d > hi {
			return 0, fmt.Errorf("%v is outside [%v, %v]", d, lo, hi)
		}
		return d, nil
	}
}

func intIn(lo, hi int) func(string) (int, error) {
	return func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("number is outside [%d, %d]", lo, hi)
		}
		if err != nil {
			return 0, fmt.Errorf("not an integer")
		}
		if n < lo || n > hi {
			return 0, fmt.Errorf("%d is outside [%d, %d]", n, lo, hi)
		}
		return n, nil
	}
}

func oneOf(values ...string) func(string) (string, error) {
	return func(s string) (string, error) {
		if !slices.Contains(values, s) {
			return "", fmt.Errorf("not one of %s", strings.Join(values, ", "))
		}
		return s, nil
	}
}

func parseBool(s string) (bool, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, fmt.Errorf("not a boolean (true or false)")
	}
	return b, nil
}
