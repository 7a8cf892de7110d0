package httpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/danielgtaylor/huma/v2"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/internal/apikey"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

type signalOutput struct{ Body *api.SignalResult }

func (s *apiServer) registerActions() {
	huma.Register(s.api, withErrors(op("resume-run", http.MethodPost, "/api/runs/{id}/resume", starflowtype.RoleAdmin,
		"Resume a stopped run as a new attempt: restore its committed steps (mode resume) or start over (replay), on its revision or the current one", "actions"),
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *struct {
			RunIDParam
			Body *api.ResumeRequest `required:"false"`
		}) (*runOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			opts := &starflow.ResumeOptions{}
			if in.Body != nil {
				opts.Mode, opts.Revision = in.Body.Mode, in.Body.Revision
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			r, err = s.engine.Resume(ctx, r.ID, opts)
			if errors.Is(err, starflowtype.ErrNoCheckpoint) {
				// The engine's sentence, with the request's way out.
				return nil, conflict(api.CodeNoCheckpoint, state.Message(err, starflowtype.ErrNoCheckpoint)+api.NoCheckpointHint)
			}
			if err != nil {
				return nil, s.fail(err)
			}
			return &runOutput{Status: http.StatusOK, Body: api.NewRunView(r, nil)}, nil
		})
	huma.Register(s.api, withErrors(op("cancel-run", http.MethodPost, "/api/runs/{id}/cancel", starflowtype.RoleOperator,
		"Cancel a run: at once when it is not executing, at its next step boundary when it is", "actions"),
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *RunIDParam) (*runOutput, error) {
			return s.act(ctx, in.ID, s.engine.Cancel)
		})
	huma.Register(s.api, withErrors(op("retrigger-run", http.MethodPost, "/api/runs/{id}/retrigger", starflowtype.RoleOperator,
		"Retrigger a stopped or ended run: a new attempt from the first step (replay)", "actions"),
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *RunIDParam) (*runOutput, error) {
			return s.act(ctx, in.ID, s.engine.Retrigger)
		})
	payloadCap := func(o *huma.Operation) {
		*o = s.withBody(*o, bodyRule{limit: workflow.LimitPayloadBytes, max: s.engine.Limits().PayloadBytes, json: true})
	}
	huma.Register(s.api, with(withErrors(limited(op("signal-run", http.MethodPost, "/api/runs/{id}/signal", starflowtype.RoleOperator,
		"Send a named signal to a run: it wakes the run's pending wait for it, or waits in the inbox for the wait to register", "actions")),
		http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge), payloadCap),
		func(ctx context.Context, in *struct {
			RunIDParam
			Body api.SignalRequest
		}) (*signalOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			res, err := s.engine.Signal(ctx, r.ID, in.Body.Name, payloadOrNull(in.Body.Payload))
			if err != nil {
				return nil, s.fail(err)
			}
			return signalAnswer(res), nil
		})
	huma.Register(s.api, with(withErrors(limited(op("signal-by-key", http.MethodPost, "/api/signals", starflowtype.RoleOperator,
		"Send a named signal to whichever run waits for it with a correlation key (or hold it for the first such wait)", "actions")),
		http.StatusRequestEntityTooLarge), payloadCap),
		func(ctx context.Context, in *struct{ Body api.KeySignalRequest }) (*signalOutput, error) {
			if err := wholeWorkspace(ctx, "correlation keys"); err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			res, err := s.engine.SignalKey(ctx, in.Body.Name, in.Body.CorrelationKey, payloadOrNull(in.Body.Payload))
			if err != nil {
				return nil, s.fail(err)
			}
			return signalAnswer(res), nil
		})
	huma.Register(s.api, withErrors(op("redrive-dead-letter", http.MethodPost, "/api/dead-letters/{id}/redrive", starflowtype.RoleOperator,
		"Re-drive a dead-lettered run as a new attempt: from its committed steps, or from the first step when its recovery mode is replay or it has none", "dead letters"),
		http.StatusNotFound, http.StatusConflict),
		func(ctx context.Context, in *RunIDParam) (*runOutput, error) {
			r, err := s.run(ctx, in.ID)
			if err != nil {
				return nil, err
			}
			if !r.DeadLettered {
				return nil, conflict(api.CodeConflict, fmt.Sprintf("run %s is not dead-lettered (status %s)", r.ID, r.Status))
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			mode := starflowtype.RecoveryResume
			if r.RecoveryMode == starflowtype.RecoveryReplay {
				mode = starflowtype.RecoveryReplay
			}
			out, err := s.engine.Resume(ctx, r.ID, &starflow.ResumeOptions{Mode: mode})
			if errors.Is(err, starflowtype.ErrNoCheckpoint) {
				out, err = s.engine.Resume(ctx, r.ID, &starflow.ResumeOptions{Mode: starflowtype.RecoveryReplay})
			}
			if err != nil {
				return nil, s.fail(err)
			}
			return &runOutput{Status: http.StatusOK, Body: api.NewRunView(out, nil)}, nil
		})
}

// act runs an operator action on the run id names.
func (s *apiServer) act(ctx context.Context, id string, f func(context.Context, string) (*starflowtype.Run, error)) (*runOutput, error) {
	r, err := s.run(ctx, id)
	if err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	r, err = f(ctx, r.ID)
	if err != nil {
		return nil, s.fail(err)
	}
	return &runOutput{Status: http.StatusOK, Body: api.NewRunView(r, nil)}, nil
}

func signalAnswer(res *state.SignalResult) *signalOutput {
	if res.Wait != nil {
		res.Wait.TokenHash = ""
	}
	return &signalOutput{&api.SignalResult{Wait: res.Wait, Inbox: res.Inbox}}
}

// payloadOrNull is a payload as the engine takes it: nil for absent.
func payloadOrNull(p json.RawMessage) json.RawMessage {
	if len(p) == 0 {
		return nil
	}
	return p
}

// Session variables.

type SessionParam struct {
	Session string `path:"session" minLength:"1" maxLength:"200" doc:"The session id."`
}

type SessionKeyParam struct {
	SessionParam
	Key string `path:"key" minLength:"1" maxLength:"200" doc:"The variable's key."`
}

type sessionVarOutput struct{ Body *starflowtype.SessionVar }
type sessionVarsOutput struct{ Body *api.SessionVarList }

func (s *apiServer) registerSessions() {
	huma.Register(s.api, op("list-session-vars", http.MethodGet, "/api/sessions/{session}/vars", starflowtype.RoleViewer,
		"List a session's variables by key", "sessions"),
		func(ctx context.Context, in *SessionParam) (*sessionVarsOutput, error) {
			if err := wholeWorkspace(ctx, "session variables"); err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			vs, err := s.store.SessionList(ctx, &state.SessionListParams{WorkspaceID: principalOf(ctx).workspace, SessionID: in.Session})
			if err != nil {
				return nil, s.fail(err)
			}
			return &sessionVarsOutput{&api.SessionVarList{Vars: nonNil(vs)}}, nil
		})
	huma.Register(s.api, withErrors(op("get-session-var", http.MethodGet, "/api/sessions/{session}/vars/{key}", starflowtype.RoleViewer,
		"Read a session variable", "sessions"), http.StatusNotFound),
		func(ctx context.Context, in *SessionKeyParam) (*sessionVarOutput, error) {
			if err := wholeWorkspace(ctx, "session variables"); err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			v, err := s.store.SessionGet(ctx, &state.SessionGetParams{WorkspaceID: principalOf(ctx).workspace, SessionID: in.Session, Key: in.Key})
			if err != nil {
				return nil, s.fail(err)
			}
			return &sessionVarOutput{v}, nil
		})
	huma.Register(s.api, with(withErrors(op("put-session-var", http.MethodPut, "/api/sessions/{session}/vars/{key}", starflowtype.RoleOperator,
		"Write a session variable (kept until deleted, or for keep_for)", "sessions"), http.StatusRequestEntityTooLarge),
		func(o *huma.Operation) {
			*o = s.withBody(*o, bodyRule{limit: workflow.LimitPayloadBytes, max: s.cfg.MaxPayload, json: true})
		}),
		func(ctx context.Context, in *struct {
			SessionKeyParam
			Body api.SessionVarRequest
		}) (*sessionVarOutput, error) {
			if err := wholeWorkspace(ctx, "session variables"); err != nil {
				return nil, err
			}
			p := &state.SessionSetParams{WorkspaceID: principalOf(ctx).workspace, SessionID: in.Session, Key: in.Key, Value: in.Body.Value}
			if len(p.Value) == 0 {
				p.Value = json.RawMessage("null")
			}
			if int64(len(p.Value)) > s.cfg.MaxPayload && s.cfg.MaxPayload > 0 {
				over := &workflow.LimitError{Limit: workflow.LimitPayloadBytes, Value: int64(len(p.Value)), Max: s.cfg.MaxPayload,
					Subject: fmt.Sprintf("the value (%d bytes as JSON) exceeds", len(p.Value))}
				return nil, huma.Error413RequestEntityTooLarge(over.Error())
			}
			if in.Body.KeepFor != "" {
				d, err := workflow.ParseDuration(in.Body.KeepFor)
				switch {
				case err != nil && errors.Is(err, workflow.ErrDurationTooLarge):
					return nil, huma.Error400BadRequest(fmt.Sprintf("keep_for %q is %v", in.Body.KeepFor, err))
				case err != nil || d <= 0:
					return nil, huma.Error400BadRequest(fmt.Sprintf("keep_for %q: want a positive duration such as 24h", in.Body.KeepFor))
				}
				p.KeepFor = d
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			v, err := s.store.SessionSet(ctx, p)
			if err != nil {
				return nil, s.fail(err)
			}
			return &sessionVarOutput{v}, nil
		})
	huma.Register(s.api, withErrors(op("delete-session-var", http.MethodDelete, "/api/sessions/{session}/vars/{key}", starflowtype.RoleOperator,
		"Delete a session variable", "sessions"), http.StatusNotFound),
		func(ctx context.Context, in *SessionKeyParam) (*struct{}, error) {
			if err := wholeWorkspace(ctx, "session variables"); err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			err := s.store.SessionDelete(ctx, &state.SessionDeleteParams{WorkspaceID: principalOf(ctx).workspace, SessionID: in.Session, Key: in.Key})
			if err != nil {
				return nil, s.fail(err)
			}
			return nil, nil
		})
}

// API keys.

type keyOutput struct {
	Status int
	Body   *api.CreatedKey
}
type keysOutput struct{ Body *api.KeyList }
type revokedOutput struct{ Body *starflowtype.APIKey }

func (s *apiServer) registerKeys() {
	huma.Register(s.api, with(op("create-key", http.MethodPost, "/api/keys", starflowtype.RoleAdmin,
		"Create an API key in the caller's workspace; the answer holds the key once", "keys"),
		func(o *huma.Operation) { o.DefaultStatus = http.StatusCreated }),
		func(ctx context.Context, in *struct{ Body api.KeyRequest }) (*keyOutput, error) {
			p := principalOf(ctx)
			if p.env != "" && in.Body.Env != p.env {
				return nil, huma.Error403Forbidden(fmt.Sprintf("a key limited to env %s can only create keys of env %s", p.env, p.env))
			}
			secret, hash := apikey.New()
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			k, err := s.store.CreateAPIKey(ctx, &state.CreateAPIKeyParams{
				WorkspaceID: p.workspace, Env: in.Body.Env, Role: in.Body.Role, Name: in.Body.Name, KeyHash: hash,
			})
			if err != nil {
				return nil, s.fail(err)
			}
			return &keyOutput{Status: http.StatusCreated, Body: &api.CreatedKey{Key: k, Secret: secret}}, nil
		})
	huma.Register(s.api, op("list-keys", http.MethodGet, "/api/keys", starflowtype.RoleAdmin,
		"List the API keys of the caller's workspace (never the keys themselves)", "keys"),
		func(ctx context.Context, in *struct {
			Revoked bool `query:"revoked" doc:"Include revoked keys."`
		}) (*keysOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			ks, err := s.keysOf(ctx, in.Revoked)
			if err != nil {
				return nil, err
			}
			return &keysOutput{&api.KeyList{Keys: nonNil(ks)}}, nil
		})
	huma.Register(s.api, withErrors(op("revoke-key", http.MethodDelete, "/api/keys/{id}", starflowtype.RoleAdmin,
		"Revoke an API key of the caller's workspace (at once: its next request is refused)", "keys"), http.StatusNotFound),
		func(ctx context.Context, in *struct {
			ID string `path:"id" maxLength:"36"`
		}) (*revokedOutput, error) {
			ks, err := s.keysOf(ctx, true)
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(ks, func(k *starflowtype.APIKey) bool { return k.ID == in.ID }) {
				return nil, huma.Error404NotFound(fmt.Sprintf("API key %s not found", in.ID))
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			k, err := s.store.RevokeAPIKey(ctx, &state.RevokeAPIKeyParams{ID: in.ID, WorkspaceID: principalOf(ctx).workspace})
			if err != nil {
				return nil, s.fail(err)
			}
			return &revokedOutput{k}, nil
		})
}

// keysOf lists the keys the caller manages: its workspace's, and of a
// key limited to an env, only the keys of that env.
func (s *apiServer) keysOf(ctx context.Context, revoked bool) ([]*starflowtype.APIKey, error) {
	p := principalOf(ctx)
	ctx, cancel := s.ctx(ctx)
	defer cancel()
	ks, err := s.store.ListAPIKeys(ctx, &state.ListAPIKeysParams{WorkspaceID: p.workspace, IncludeRevoked: revoked})
	if err != nil {
		return nil, s.fail(err)
	}
	if p.env != "" {
		ks = slices.DeleteFunc(ks, func(k *starflowtype.APIKey) bool { return k.Env != p.env })
	}
	return ks, nil
}
