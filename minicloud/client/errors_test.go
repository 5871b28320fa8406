package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		header     map[string]string
		body       string
		check      func(error) bool
		code       string
		retryAfter time.Duration
	}{
		{"not found", 404, nil, `{"error":{"code":"not_found","message":"instance \"i-1\" not found"}}`, IsNotFound, "not_found", 0},
		{"conflict", 409, nil, `{"error":{"code":"conflict","message":"name in use"}}`, IsConflict, "conflict", 0},
		{"invalid", 400, nil, `{"error":{"code":"invalid_argument","message":"bad"}}`, IsInvalid, "invalid_argument", 0},
		{"unauthorized", 401, nil, `{"error":{"code":"unauthenticated","message":"no"}}`, IsUnauthorized, "unauthenticated", 0},
		{"throttled", 429, map[string]string{"Retry-After": "7"}, `{"error":{"code":"throttled","message":"slow down"}}`, IsThrottled, "throttled", 7 * time.Second},
		{"throttled without header", 429, nil, `{"error":{"code":"throttled","message":"slow down"}}`, IsThrottled, "throttled", time.Second},
		{"proxy error page", 502, nil, `<html>bad gateway</html>`, func(err error) bool { return !IsNotFound(err) && !IsThrottled(err) }, "Bad Gateway", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := New(srv.URL, "t")
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.GetInstance(context.Background(), "i-1")
			if !tc.check(err) {
				t.Fatalf("error %v not classified as %s", err, tc.name)
			}
			e := err.(*Error)
			if e.Code != tc.code || e.StatusCode != tc.status || e.Operation != "GET /v1/instances/i-1" {
				t.Fatalf("error %+v", e)
			}
			if IsRetryable(err) != (tc.status == 429 || tc.status >= 500) || IsServerError(err) != (tc.status >= 500) {
				t.Fatalf("IsRetryable/IsServerError wrong for %d", tc.status)
			}
			d, ok := RetryAfter(err)
			if d != tc.retryAfter || ok != (tc.status == 429) {
				t.Fatalf("RetryAfter = %v, %v; want %v", d, ok, tc.retryAfter)
			}
		})
	}
}

func TestNoAnswerIsRetryable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	c, err := New(url, "t")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetInstance(context.Background(), "i-1")
	if err == nil || !IsRetryable(err) || IsNotFound(err) || IsServerError(err) {
		t.Fatalf("connection refused: %v; want retryable", err)
	}
	if IsRetryable(nil) {
		t.Fatal("nil is retryable")
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	for _, tc := range []struct{ url, token string }{
		{"127.0.0.1:8780", "t"},
		{"ftp://x", "t"},
		{"http://", "t"},
		{"http://127.0.0.1:8780", ""},
	} {
		if _, err := New(tc.url, tc.token); err == nil {
			t.Errorf("New(%q, %q) accepted", tc.url, tc.token)
		}
	}
}

func TestListAllFollowsPages(t *testing.T) {
	var pages []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" {
			w.WriteHeader(401)
			return
		}
		tok := r.URL.Query().Get("page_token")
		pages = append(pages, tok+"|"+r.URL.Query().Get("tag"))
		switch tok {
		case "":
			w.Write([]byte(`{"items":[{"id":"r-1"},{"id":"r-2"}],"next_page_token":"p2"}`))
		case "p2":
			w.Write([]byte(`{"items":[{"id":"r-3"}]}`))
		}
	}))
	defer srv.Close()
	c, _ := New(srv.URL+"/", "t")
	routes, err := c.ListRoutes(context.Background(), ListOptions{Tags: map[string]string{"k": "v"}})
	if err != nil || len(routes) != 3 || routes[2].ID != "r-3" {
		t.Fatalf("routes %+v, %v", routes, err)
	}
	if len(pages) != 2 || pages[0] != "|k=v" || pages[1] != "p2|k=v" {
		t.Fatalf("requests %v: want both pages with the filter", pages)
	}
}
