package webhook

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Name is the webhook's name in --webhooks, and the metrics' webhook label.
const Name = "service-load-balancer"

// Path is where the webhook is served.
const Path = "/validate-service-load-balancer"

// The metrics upstream's webhook hosting records, under its names and labels.
var (
	requestTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cloud_provider_webhook_request_total",
		Help: "Number of webhook HTTP requests, by status code.",
	}, []string{"code", "webhook"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cloud_provider_webhook_request_duration_seconds",
		Help:    "Webhook request latency in seconds, by status code.",
		Buckets: []float64{0.25, 0.5, 0.7, 1, 1.5, 3, 5, 10},
	}, []string{"code", "webhook"})
)

func init() {
	metrics.Registry.MustRegister(requestTotal, requestDuration)
}

// Handler returns the HTTP handler of the webhook: AdmissionReviews of
// Services in, v's verdict out, each request counted in the metrics.
func Handler(v *Validator) http.Handler {
	wh := &admission.Webhook{Handler: &handler{v: v, decoder: admission.NewDecoder(scheme.Scheme)}}
	return instrument(Name, wh)
}

type handler struct {
	v       *Validator
	decoder admission.Decoder
}

// Handle implements admission.Handler.
func (h *handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != "" || req.Kind.Kind != "Service" || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("")
	}
	svc := &v1.Service{}
	if err := h.decoder.DecodeRaw(req.Object, svc); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the Service: %w", err))
	}
	var old *v1.Service
	if req.Operation == admissionv1.Update {
		old = &v1.Service{}
		if err := h.decoder.DecodeRaw(req.OldObject, old); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode the stored Service: %w", err))
		}
	}
	problems, warnings := h.v.Validate(ctx, old, svc)
	if len(problems) == 0 {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	log.FromContext(ctx).V(2).Info("Refused a Service", "namespace", req.Namespace, "name", req.Name, "problems", len(problems))
	return denied(req, problems).WithWarnings(warnings...)
}

// denied is a 422 Invalid answer naming every problem, as the API server
// answers a Service that fails its own validation.
func denied(req admission.Request, problems []Problem) admission.Response {
	msgs := make([]string, len(problems))
	causes := make([]metav1.StatusCause, len(problems))
	for i, p := range problems {
		msgs[i] = p.String()
		causes[i] = metav1.StatusCause{Type: metav1.CauseTypeFieldValueInvalid, Field: p.Field, Message: p.Message}
	}
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed: false,
		Result: &metav1.Status{
			Status:  metav1.StatusFailure,
			Code:    http.StatusUnprocessableEntity,
			Reason:  metav1.StatusReasonInvalid,
			Message: fmt.Sprintf("Service %s/%s: %s", req.Namespace, req.Name, strings.Join(msgs, "; ")),
			Details: &metav1.StatusDetails{Name: req.Name, Kind: "Service", Causes: causes},
		},
	}}
}

// instrument counts each request and its latency by status code.
func instrument(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		code := strconv.Itoa(rec.code)
		requestTotal.WithLabelValues(code, name).Inc()
		requestDuration.WithLabelValues(code, name).Observe(time.Since(start).Seconds())
	})
}

// statusRecorder remembers the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}
