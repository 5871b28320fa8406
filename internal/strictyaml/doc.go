// Package strictyaml decodes stratus's YAML configuration files strictly (unknown
// and duplicate fields are errors) with errors that name the YAML path of the bad
// value, as the configuration's own validation errors do:
//
//	route.resyncPeriod: invalid duration "1x": time: unknown unit "x" in duration "1x"
//	providers[0].budget.rate: want a number, got "fast"
//	service.orphanGracePeriods: unknown field
//
// Decoding is sigs.k8s.io/yaml's (YAML converted to JSON, then encoding/json), so a
// file means exactly what it means to the Kubernetes tools. encoding/json names a
// bad value in Go's spelling (struct type names, no list indices) or not at all
// (errors from a type's UnmarshalJSON, such as metav1.Duration's), so when
// decoding fails the document is walked alongside the Go type to find every value
// that does not decode, and each is reported under its path.
package strictyaml
