// Package patch writes a controller's change to a Kubernetes object as the
// difference from the version the controller read, so that fields other
// writers own (kubelet's status, another controller's labels) survive, and
// retries a conditional change on conflict from a fresh read. The node, route
// and lifecycle controllers all write Nodes through Apply.
package patch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Kind says how a change is sent.
type Kind int

const (
	// Locked is a JSON merge patch conditional on the resourceVersion read:
	// for a list the change replaces whole (taints), which must not drop an
	// entry another writer added meanwhile. A conflict re-reads the object
	// and applies the change again.
	Locked Kind = iota
	// Merge is a JSON merge patch with no resourceVersion, which cannot
	// conflict: for fields only the caller writes (labels it sets, a
	// status.addresses list it replaces whole).
	Merge
	// Strategic is a strategic merge patch with no resourceVersion: lists
	// with a merge key (conditions, by type) are merged entry by entry, so
	// it cannot conflict with kubelet's status updates.
	Strategic
	// Tested is a JSON patch (RFC 6902) that first tests every value the
	// change replaces or removes against the value read, and replaces a list
	// whole. It fails only when another writer changed what the change
	// overwrites, not on an unrelated write such as kubelet's first status
	// update of a joining node, which makes a Locked patch conflict. A
	// failed test re-reads the object and applies the change again, as a
	// Locked conflict does. A change that adds a list or object the read
	// version lacks is sent as Locked: JSON patch cannot test absence.
	Tested
)

// Options say how Apply writes.
type Options struct {
	// Kind is the kind of patch (default Locked).
	Kind Kind
	// Status patches the status subresource instead of the object.
	Status bool
	// Backoff bounds the retries of a Locked patch on conflict (default
	// retry.DefaultRetry).
	Backoff *wait.Backoff
}

// Apply applies mutate to a copy of obj and, when the copy differs, sends the
// difference to the API server as opts say. It returns the object as the API
// server answered, or obj when mutate changed nothing. A Locked patch that
// conflicts, or a Tested one whose test fails, re-reads the object through
// reader (the API server: a cache may lag behind the conflicting write) and
// applies mutate again. The error of a
// gone object satisfies apierrors.IsNotFound.
func Apply[T client.Object](ctx context.Context, c client.Client, reader client.Reader, obj T, opts Options, mutate func(T)) (T, error) {
	backoff := retry.DefaultRetry
	if opts.Backoff != nil {
		backoff = *opts.Backoff
	}
	cur := obj
	err := retry.OnError(backoff, retriable, func() error {
		want := cur.DeepCopyObject().(T)
		mutate(want)
		if equality.Semantic.DeepEqual(cur, want) {
			return nil
		}
		p, data, err := patchOf(cur, want, opts.Kind)
		if err != nil {
			return fmt.Errorf("compute the patch of %s: %w", client.ObjectKeyFromObject(cur), err)
		}
		if data == nil {
			return nil
		}
		// The answer goes into a new object: decoding into a used one would
		// keep map entries the answer no longer has.
		answer := empty(cur)
		answer.SetName(cur.GetName())
		answer.SetNamespace(cur.GetNamespace())
		if opts.Status {
			err = c.Status().Patch(ctx, answer, client.RawPatch(p, data))
		} else {
			err = c.Patch(ctx, answer, client.RawPatch(p, data))
		}
		switch {
		case err == nil:
			cur = answer
		case apierrors.IsConflict(err):
			fresh := empty(cur)
			if gerr := reader.Get(ctx, client.ObjectKeyFromObject(cur), fresh); gerr != nil {
				return fmt.Errorf("re-read %s after a conflict: %w", client.ObjectKeyFromObject(cur), gerr)
			}
			cur = fresh
		case p == jsonPatch && apierrors.IsInvalid(err):
			// A failed test is a 422, as an invalid change is: the two
			// are told apart by whether the object changed since it was
			// read. A change refused for itself is returned after one
			// fresh read.
			fresh := empty(cur)
			if gerr := reader.Get(ctx, client.ObjectKeyFromObject(cur), fresh); gerr != nil {
				return fmt.Errorf("re-read %s after a failed test: %w", client.ObjectKeyFromObject(cur), gerr)
			}
			if fresh.GetResourceVersion() != cur.GetResourceVersion() {
				cur = fresh
				return errStale
			}
		}
		return err
	})
	if errors.Is(err, errStale) {
		err = fmt.Errorf("patch %s: %w", client.ObjectKeyFromObject(cur), err)
	}
	return cur, err
}

// errStale is a Tested patch whose test failed against a newer version.
var errStale = errors.New("the values the change replaces kept changing")

func retriable(err error) bool { return apierrors.IsConflict(err) || errors.Is(err, errStale) }

// jsonPatch is the type of a Tested patch.
const jsonPatch = types.JSONPatchType

// patchOf computes the patch from cur to want of kind k: its type and body.
func patchOf[T client.Object](cur, want T, k Kind) (types.PatchType, []byte, error) {
	var p client.Patch
	switch k {
	case Merge:
		p = client.MergeFrom(cur)
	case Strategic:
		p = client.StrategicMergeFrom(cur)
	case Tested:
		ops, ok, err := testedOps(cur, want)
		if err != nil {
			return "", nil, err
		}
		if ok {
			if len(ops) == 0 {
				return jsonPatch, nil, nil // equal as JSON: nothing to send
			}
			data, err := json.Marshal(ops)
			return jsonPatch, data, err
		}
		p = client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})
	default:
		p = client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})
	}
	data, err := p.Data(want)
	return p.Type(), data, err
}

// op is one JSON patch operation. Value is always sent for test, add and
// replace (a test of null must say null).
type op struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// MarshalJSON leaves out the value of a remove.
func (o op) MarshalJSON() ([]byte, error) {
	if o.Op == "remove" {
		return json.Marshal(struct {
			Op   string `json:"op"`
			Path string `json:"path"`
		}{o.Op, o.Path})
	}
	type plain op
	return json.Marshal(plain(o))
}

// testedOps is the JSON patch from cur to want in which every replace and
// remove is preceded by a test of the value read; ok is false when the change
// adds a list or object at a path cur lacks.
func testedOps(cur, want any) (ops []op, ok bool, err error) {
	var a, b any
	for _, x := range []struct {
		obj any
		out *any
	}{{cur, &a}, {want, &b}} {
		data, err := json.Marshal(x.obj)
		if err != nil {
			return nil, false, err
		}
		if err := json.Unmarshal(data, x.out); err != nil {
			return nil, false, err
		}
	}
	ops, ok = diff(a.(map[string]any), b.(map[string]any), "", nil)
	return ops, ok, nil
}

// diff appends the operations from object a to object b at path: objects are
// compared member by member, anything else (lists included) replaced whole.
func diff(a, b map[string]any, path string, ops []op) ([]op, bool) {
	for _, k := range slices.Sorted(maps.Keys(a)) {
		p := path + "/" + pointerEscaper.Replace(k)
		bv, inB := b[k]
		switch {
		case !inB:
			ops = append(ops, op{"test", p, a[k]}, op{Op: "remove", Path: p})
		case !reflect.DeepEqual(a[k], bv):
			am, aObj := a[k].(map[string]any)
			bm, bObj := bv.(map[string]any)
			if aObj && bObj {
				var ok bool
				if ops, ok = diff(am, bm, p, ops); !ok {
					return nil, false
				}
				continue
			}
			ops = append(ops, op{"test", p, a[k]}, op{"replace", p, bv})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if _, inA := a[k]; inA {
			continue
		}
		switch b[k].(type) {
		case map[string]any, []any:
			return nil, false
		}
		ops = append(ops, op{"add", path + "/" + pointerEscaper.Replace(k), b[k]})
	}
	return ops, true
}

// pointerEscaper escapes a member name for a JSON pointer (RFC 6901).
var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// empty is a new zero object of obj's type.
func empty[T client.Object](obj T) T {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
}
