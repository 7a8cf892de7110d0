package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/starflow/starflow/internal/egress"
	"github.com/starflow/starflow/internal/waketoken"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/step"
)

// Notify delivery (SPEC §6 "notify the host", issue 5): once a wait is
// registered, and never before, the engine POSTs the wake token to the
// wait's notify URL. The request is stored rendered (and scrubbed of
// secrets) in workflow_waits.notify_json, so a maintenance pass can retry
// it (DeliverNotify) after the runner that registered the wait is gone.

// Notify tries made inline, right after the wait is registered, and their
// bounds; what does not get through is left to the maintenance pass.
const (
	notifyInlineTries = 3
	notifyTryTimeout  = 5 * time.Second
	notifyRetryIn     = 10 * time.Second
	// notifyGrace keeps the maintenance retrier off a just-registered
	// wait while the inline tries above may still be in flight (3 × 5 s
	// plus backoff), so one registration is not POSTed twice at once; the
	// inline tries end by recording their outcome (MarkNotified).
	notifyGrace = 30 * time.Second
)

// notifyRequest is a wait's notify request as stored in notify_json.
type notifyRequest struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    map[string]any    `json:"body,omitempty"`
	Form    any               `json:"form,omitempty"` // approval waits
	// ExpiresAt is the token's expiry (whole seconds): with the wait's id,
	// run and key id it re-creates the token.
	ExpiresAt time.Time `json:"expires_at"`
}

// DeliverNotify delivers the notify request of a registered wait: it
// re-creates the wait's token from the stored key id and expiry, checks it
// against the stored token hash, and POSTs {run_id, wait_id, signal,
// token, wake_url, expires_at (RFC 3339), form} merged over the stored
// body. A nil error means the receiver answered 2xx. It does not record
// the outcome (the caller does, with MarkNotified). Headers and body are
// the stored, scrubbed rendering: a value that was a secret is sent as
// "***" (decision 39).
func (e *Engine) DeliverNotify(ctx context.Context, w *starflowtype.Wait) error {
	if len(w.Notify) == 0 {
		return fmt.Errorf("wait %s has no notify request", w.ID)
	}
	var req notifyRequest
	if err := json.Unmarshal(w.Notify, &req); err != nil {
		return fmt.Errorf("wait %s: stored notify request: %w", w.ID, err)
	}
	key, err := e.keyByID(ctx, w.KeyID)
	if err != nil {
		return fmt.Errorf("wait %s: %w", w.ID, err)
	}
	token := waketoken.Sign(key, w.RunID, w.ID, req.ExpiresAt)
	if waketoken.Hash(token) != w.TokenHash {
		return fmt.Errorf("wait %s: the re-created token does not match the stored hash (key %q changed?)", w.ID, w.KeyID)
	}
	return e.postNotify(ctx, w, &req, token)
}

// WakeURL is the wake_url a notify receiver gets for token: the configured
// WakeURL with "{token}" replaced by the token ("" when none is set).
func (e *Engine) WakeURL(token string) string {
	return strings.ReplaceAll(e.cfg.WakeURL, "{token}", token)
}

func (e *Engine) postNotify(ctx context.Context, w *starflowtype.Wait, req *notifyRequest, token string) error {
	body := make(map[string]any, len(req.Body)+7)
	for k, v := range req.Body {
		body[k] = v
	}
	body["run_id"], body["wait_id"], body["signal"] = w.RunID, w.ID, w.Signal
	body["token"], body["wake_url"], body["expires_at"] = token, e.WakeURL(token), req.ExpiresAt.UTC().Format(time.RFC3339)
	if req.Form != nil {
		body["form"] = req.Form
	}
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("notify body: %w", err)
	}
	tctx, cancel := context.WithTimeout(ctx, notifyTryTimeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(tctx, http.MethodPost, req.URL, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("notify %s: %w", req.URL, err)
	}
	e.injectTrace(ctx, hr.Header)
	for k, v := range req.Headers {
		hr.Header.Set(k, v)
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Idempotency-Key", "starflow-notify/"+w.ID)
	resp, err := e.cfg.HTTPClient.Do(hr)
	if err != nil {
		return fmt.Errorf("notify %s: %w", req.URL, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("notify %s: answered %s", req.URL, resp.Status)
	}
	return nil
}

// notifyInline delivers a just-registered wait's notify request with a few
// quick tries and records the outcome; a failure (returned) is left to the
// maintenance pass (PendingNotifies). req is the unscrubbed rendering.
func (e *Engine) notifyInline(ctx context.Context, w *starflowtype.Wait, req *notifyRequest, token string) error {
	var err error
	for try := 1; try <= notifyInlineTries; try++ {
		if err = e.postNotify(ctx, w, req, token); err == nil || refusedByPolicy(err) {
			break // a refusal does not change within a second: the maintenance pass retries it
		}
		if try < notifyInlineTries {
			if serr := e.cfg.Sleep(ctx, time.Duration(try)*200*time.Millisecond); serr != nil {
				break
			}
		}
	}
	p := &state.MarkNotifiedParams{WaitID: w.ID, Delivered: err == nil, RetryIn: notifyRetryIn}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	if merr := e.cfg.Store.MarkNotified(mctx, p); merr != nil && !errors.Is(merr, context.Canceled) {
		e.cfg.Logger.Warn("recording a notify try failed", "run_id", w.RunID, "wait_id", w.ID, "error", merr)
	}
	return err
}

// checkNotifyURL checks a wait's rendered notify URL against the egress
// policy before the wait is entered: when the policy refuses every
// address its host resolves to, the wait step fails at once with the
// refusal (permanent, as a service_call's), rather than parking a run
// whose token can never be delivered. A URL that does not parse or
// resolve is left to the delivery, which reports it. The dial-time check
// still applies to every delivery (a name may resolve elsewhere later).
func (e *Engine) checkNotifyURL(ctx context.Context, raw string) error {
	if e.cfg.Egress == nil {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	if err := e.cfg.Egress.CheckHost(ctx, u.Hostname()); err != nil {
		return step.Permanent(err)
	}
	return nil
}

// refusedByPolicy reports whether a request failed on the egress policy
// (a refused address or a redirect it would not follow).
func refusedByPolicy(err error) bool {
	var refused *egress.RefusedError
	var redirect *egress.RedirectError
	return errors.As(err, &refused) || errors.As(err, &redirect)
}
