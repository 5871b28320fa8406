// Package events gives each controller an event recorder that writes core/v1
// Events with the controller's upstream source component name
// (cloud-node-controller, cloud-node-lifecycle-controller, service-controller,
// route_controller), as the upstream cloud-controller-manager does.
package events

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/stratus-ccm/stratus/pkg/echo"
)

// NewRecorder returns a recorder writing Events as component through the manager's
// API connection. Messages longer than echo.MaxMessage bytes are shortened.
// Broadcasting stops when the manager stops.
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
	return capped{b.NewRecorder(scheme.Scheme, v1.EventSource{Component: component})}, nil
}

// capped shortens every message to echo.MaxMessage bytes (with a marker giving
// its length): messages repeat errors that repeat user input, such as annotation
// values, of any size.
type capped struct{ record.EventRecorder }

func (r capped) Event(obj runtime.Object, eventtype, reason, message string) {
	r.EventRecorder.Event(obj, eventtype, reason, echo.Shorten(message, echo.MaxMessage))
}

func (r capped) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (r capped) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, "%s", echo.Shorten(fmt.Sprintf(messageFmt, args...), echo.MaxMessage))
}
