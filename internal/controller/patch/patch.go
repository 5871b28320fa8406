// Package patch writes a controller's change to a Kubernetes object as the
// difference from the version the controller read, so that fields other
// writers own (kubelet's status, another controller's labels) survive, and
// retries a conditional change on conflict from a fresh read. The node, route
// and lifecycle controllers all write Nodes through Apply.
package patch

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
// conflicts re-reads the object through reader (the API server: a cache may
// lag behind the conflicting write) and applies mutate again. The error of a
// gone object satisfies apierrors.IsNotFound.
func Apply[T client.Object](ctx context.Context, c client.Client, reader client.Reader, obj T, opts Options, mutate func(T)) (T, error) {
	backoff := retry.DefaultRetry
	if opts.Backoff != nil {
		backoff = *opts.Backoff
	}
	cur := obj
	err := retry.RetryOnConflict(backoff, func() error {
		want := cur.DeepCopyObject().(T)
		mutate(want)
		if equality.Semantic.DeepEqual(cur, want) {
			return nil
		}
		var p client.Patch
		switch opts.Kind {
		case Merge:
			p = client.MergeFrom(cur)
		case Strategic:
			p = client.StrategicMergeFrom(cur)
		default:
			p = client.MergeFromWithOptions(cur, client.MergeFromWithOptimisticLock{})
		}
		data, err := p.Data(want)
		if err != nil {
			return fmt.Errorf("compute the patch of %s: %w", client.ObjectKeyFromObject(cur), err)
		}
		// The answer goes into a new object: decoding into a used one would
		// keep map entries the answer no longer has.
		answer := empty(cur)
		answer.SetName(cur.GetName())
		answer.SetNamespace(cur.GetNamespace())
		if opts.Status {
			err = c.Status().Patch(ctx, answer, client.RawPatch(p.Type(), data))
		} else {
			err = c.Patch(ctx, answer, client.RawPatch(p.Type(), data))
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
		}
		return err
	})
	return cur, err
}

// empty is a new zero object of obj's type.
func empty[T client.Object](obj T) T {
	return reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
}
