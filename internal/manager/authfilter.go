package manager

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1 "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
)

// delegatedAuth guards a handler as the API server's delegated
// authentication and authorization do (what upstream's secure serving does):
// a bearer token checked with a TokenReview, then a SubjectAccessReview for
// the request's verb on its path. Answers follow the API server's: no
// identity (no token, a rejected token, or a TokenReview that failed) is 401,
// a denied identity 403, a failed SubjectAccessReview 500. Tokens are never
// logged. Decisions are cached (authentication 1m, allow 5m, deny 30s).
type delegatedAuth struct {
	authn authenticator.Request
	authz authorizer.Authorizer
}

// reviewBackoff retries TokenReviews and SubjectAccessReviews that fail.
var reviewBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}

func newDelegatedAuth(cfg *rest.Config, hc *http.Client) (*delegatedAuth, error) {
	authnClient, err := authenticationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("TokenReview client: %w", err)
	}
	authzClient, err := authorizationv1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("SubjectAccessReview client: %w", err)
	}
	backoff := reviewBackoff
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		Anonymous:                &apiserver.AnonymousAuthConfig{Enabled: false},
		CacheTTL:                 time.Minute,
		TokenAccessReviewClient:  authnClient,
		TokenAccessReviewTimeout: 10 * time.Second,
		WebhookRetryBackoff:      &backoff,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("delegated authentication: %w", err)
	}
	backoff2 := reviewBackoff
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: authzClient,
		AllowCacheTTL:             5 * time.Minute,
		DenyCacheTTL:              30 * time.Second,
		WebhookRetryBackoff:       &backoff2,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("delegated authorization: %w", err)
	}
	return &delegatedAuth{authn: authn, authz: authz}, nil
}

// wrap returns next behind authentication and authorization.
func (a *delegatedAuth) wrap(log logr.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		res, ok, err := a.authn.AuthenticateRequest(req)
		if err != nil || !ok {
			if err != nil {
				// The error is the TokenReview's answer ("invalid bearer
				// token") or why it failed; it never contains the token.
				log.V(2).Info("request not authenticated", "path", req.URL.Path, "reason", err.Error())
			}
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		attrs := authorizer.AttributesRecord{User: res.User, Verb: strings.ToLower(req.Method), Path: req.URL.Path}
		decision, reason, err := a.authz.Authorize(req.Context(), attrs)
		if err != nil {
			log.Error(err, "authorization check failed", "user", res.User.GetName(), "path", req.URL.Path)
			http.Error(w, "Authorization check failed", http.StatusInternalServerError)
			return
		}
		if decision != authorizer.DecisionAllow {
			log.V(2).Info("request forbidden", "user", res.User.GetName(), "path", req.URL.Path, "reason", reason)
			http.Error(w, fmt.Sprintf("Forbidden: user %q may not %s %s", res.User.GetName(), attrs.Verb, req.URL.Path), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, req)
	})
}
