// Package events gives each controller an event recorder that writes core/v1
// Events with the controller's upstream source component name
// (cloud-node-controller, cloud-node-lifecycle-controller, service-controller,
// route_controller), as the upstream cloud-controller-manager does.
package events

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// NewRecorder returns a recorder writing Events as component through the manager's
// API connection. Broadcasting stops when the manager stops.
func NewRecorder(mgr manager.Manager, component string) (record.EventRecorder, error) {
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("event recorder for %s: %w", component, err)
	}
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: cs.CoreV1().Events("")})
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		b.Shutdown()
		return nil
	})); err != nil {
		return nil, err
	}
	return b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component}), nil
}
