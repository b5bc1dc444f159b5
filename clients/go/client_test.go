package lenstack

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A 503 with Retry-After, then the answer: the client waits what the API asked and sends the
// same request again under the same x-request-id (so the API answers it once, billed once).
func TestRetriesWithTheSameRequestID(t *testing.T) {
	var mu sync.Mutex
	var ids []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids = append(ids, r.Header.Get("x-request-id"))
		n := len(ids)
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer svc_test_key" {
			t.Errorf("authorization %q", r.Header.Get("Authorization"))
		}
		w.Header().Set("content-type", "application/json")
		if n == 1 {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":{"code":"SERVICE_UNAVAILABLE","message":"busy","retryable":true,"requestId":"r1"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"tier":"starter","community":{"balance":5,"monthlyAllowance":0,"resetsInDays":0},"purchased":{"balance":2},"reserved":0}`))
	}))
	defer server.Close()
	var waited []time.Duration
	c, err := New(server.URL, "svc_test_key", WithWait(func(_ context.Context, d time.Duration) error { waited = append(waited, d); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.GetUsageWithResponse(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.JSON200 == nil || res.JSON200.Community.Balance != 5 || res.JSON200.Purchased.Balance != 2 {
		t.Fatalf("usage %s", res.Body)
	}
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] {
		t.Fatalf("request ids %v: want the same one twice", ids)
	}
	if len(waited) != 1 || waited[0] != 7*time.Second {
		t.Fatalf("waited %v: want the API's Retry-After, 7s", waited)
	}
}

// An error answer is an *APIError with the envelope's code, the credits of a 402, and no retry.
func TestAPIErrorCarriesTheEnvelope(t *testing.T) {
	calls := 0
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("content-type", "application/json")
		w.Header().Set("x-request-id", "req_abc")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = w.Write([]byte(`{"error":{"code":"PLAN_LIMIT_EXCEEDED","message":"needs 3 credits","retryable":false,"requestId":"req_abc","credits":{"needed":3,"community":1,"purchased":0,"total":1,"resetsInDays":0}}}`))
	}))
	defer server.Close()
	c, err := New(server.URL, "svc_test_key")
	if err != nil {
		t.Fatal(err)
	}
	image := "aGVsbG8="
	_, err = c.Analyze(context.Background(), AnalyzeRequest{ImageBase64: &image})
	var apiErr *APIError
	if !errors.As(err, &apiErr) {
		t.Fatalf("error %v is not an *APIError", err)
	}
	if apiErr.Status != 402 || apiErr.Code != ErrorCodePLANLIMITEXCEEDED || apiErr.RequestID != "req_abc" || apiErr.Credits == nil || apiErr.Credits.Needed != 3 {
		t.Fatalf("error %+v", apiErr)
	}
	if calls != 1 {
		t.Fatalf("%d calls: a 402 is not retried", calls)
	}
}

func TestNewRefusesNoKey(t *testing.T) {
	if _, err := New("", ""); err == nil {
		t.Fatal("a client without a key")
	}
}

// A request body given as a plain io.Reader cannot be sent twice: it is not retried (an empty
// resend would be a misleading 400, or an upload of nothing).
func TestNoRetryOfABodyThatCannotBeReread(t *testing.T) {
	var bodies []string
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		bodies = append(bodies, string(b))
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer server.Close()
	c, err := New(server.URL, "svc_test_key", WithWait(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.AnalyzeV1WithBody(context.Background(), nil, "application/json", io.MultiReader(strings.NewReader(`{"imageUrl":"https://example.com/a.jpg"}`)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if len(bodies) != 1 || bodies[0] == "" {
		t.Fatalf("bodies sent %q: want the one body, once", bodies)
	}
}

// A 503 whose envelope says retryable:false is not retried; a Retry-After past a minute is
// returned to the caller rather than slept through.
func TestRetryOnlyWhatHelps(t *testing.T) {
	for _, tc := range []struct {
		name, retryAfter, body string
	}{
		{"not retryable", "1", `{"error":{"code":"SERVICE_UNAVAILABLE","message":"no payment processor","retryable":false,"requestId":"r"}}`},
		{"an hour", "3600", `{"error":{"code":"RATE_LIMITED","message":"slow down","retryable":true,"requestId":"r"}}`},
	} {
		calls := 0
		server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			calls++
			w.Header().Set("content-type", "application/json")
			w.Header().Set("Retry-After", tc.retryAfter)
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(tc.body))
		}))
		c, err := New(server.URL, "svc_test_key", WithWait(func(context.Context, time.Duration) error { return nil }))
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.GetBatch(context.Background(), "bat_x")
		var apiErr *APIError
		if !errors.As(err, &apiErr) || apiErr.Status != 503 || calls != 1 {
			t.Fatalf("%s: %d calls, error %v", tc.name, calls, err)
		}
		server.Close()
	}
}
