package httpserver

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
	"github.com/starflow/starflow/workflow"
)

// SourceBody is a request whose body is a definition's source, YAML or
// JSON (Content-Type application/json for JSON; anything else is read as
// YAML, of which JSON is a subset).
type SourceBody struct {
	ContentType string `header:"Content-Type"`
	RawBody     []byte `contentType:"application/yaml"`
}

// filename is the name the definition's errors carry.
func (in *SourceBody) filename(name string) string {
	if mt, _, err := mime.ParseMediaType(in.ContentType); err == nil && mt == "application/json" {
		return name + ".json"
	}
	return name + ".yaml"
}

type NameParam struct {
	Name string `path:"name" minLength:"1" maxLength:"200" doc:"The workflow's name."`
}

// RevisionParam names one stored revision of a workflow.
type RevisionParam struct {
	NameParam
	Revision string `path:"revision" pattern:"^[0-9a-fA-F]{64}$" doc:"The revision: the sha256 (64 hex digits) of the definition's canonical JSON."`
}

type namedSourceInput struct {
	NameParam
	SourceBody
}

type appliedOutput struct{ Body *api.Applied }
type definitionOutput struct{ Body *starflowtype.Definition }
type workflowsOutput struct{ Body *api.WorkflowList }
type revisionsOutput struct{ Body *api.RevisionList }
type validationOutput struct{ Body *api.Validation }
type planOutput struct{ Body *starflow.Plan }

func (s *apiServer) registerDefinitions() {
	withSource := func(o huma.Operation) huma.Operation {
		// The source cap (Limits.SourceBytes) answers first, naming
		// limits.definition_bytes; the body limit stops far larger ones,
		// naming it too.
		o = s.withBody(o, bodyRule{limit: workflow.LimitSourceBytes, max: int64(s.engine.Limits().SourceBytes)})
		return withErrors(o, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity)
	}
	huma.Register(s.api, withSource(op("apply-workflow", http.MethodPut, "/api/workflows/{name}", starflowtype.RoleAdmin,
		"Apply a definition (its YAML or JSON source) as the workflow's current revision", "definitions")),
		func(ctx context.Context, in *namedSourceInput) (*appliedOutput, error) {
			if err := wholeWorkspace(ctx, "definitions"); err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			def, err := s.engine.Parse(in.filename(in.Name), in.RawBody)
			if err != nil {
				return nil, s.fail(err)
			}
			if def.Name != in.Name {
				return nil, huma.Error422UnprocessableEntity(fmt.Sprintf("the definition is named %q but the path names %q", def.Name, in.Name))
			}
			before, err := s.store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: s.engine.ScopeOf(ctx).Workspace, Name: in.Name})
			if err != nil && !errors.Is(err, starflowtype.ErrNotFound) {
				return nil, s.fail(err)
			}
			d, err := s.engine.Apply(ctx, in.filename(in.Name), in.RawBody)
			if err != nil {
				return nil, s.fail(err)
			}
			return &appliedOutput{&api.Applied{Definition: d, Changed: before == nil || before.Revision != d.Revision}}, nil
		})
	huma.Register(s.api, op("list-workflows", http.MethodGet, "/api/workflows", starflowtype.RoleViewer,
		"List the workflows: each one's current revision (without spec and source)", "definitions"),
		func(ctx context.Context, _ *struct{}) (*workflowsOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			defs, err := s.store.ListDefinitions(ctx, &state.ListDefinitionsParams{WorkspaceID: s.engine.ScopeOf(ctx).Workspace})
			if err != nil {
				return nil, s.fail(err)
			}
			return &workflowsOutput{&api.WorkflowList{Workflows: summaries(defs)}}, nil
		})
	huma.Register(s.api, withErrors(op("get-workflow", http.MethodGet, "/api/workflows/{name}", starflowtype.RoleViewer,
		"Read a workflow's current revision, spec and source included", "definitions"), http.StatusNotFound),
		func(ctx context.Context, in *NameParam) (*definitionOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			d, err := s.store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: s.engine.ScopeOf(ctx).Workspace, Name: in.Name})
			if err != nil {
				return nil, s.fail(err)
			}
			return &definitionOutput{d}, nil
		})
	huma.Register(s.api, withErrors(op("list-workflow-revisions", http.MethodGet, "/api/workflows/{name}/revisions", starflowtype.RoleViewer,
		"List a workflow's revisions, the most recently applied first", "definitions"), http.StatusNotFound),
		func(ctx context.Context, in *NameParam) (*revisionsOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			defs, err := s.store.ListRevisions(ctx, &state.ListRevisionsParams{WorkspaceID: s.engine.ScopeOf(ctx).Workspace, Name: in.Name})
			if err != nil {
				return nil, s.fail(err)
			}
			if len(defs) == 0 {
				return nil, huma.Error404NotFound(fmt.Sprintf("workflow %q is not applied", in.Name))
			}
			return &revisionsOutput{&api.RevisionList{Revisions: summaries(defs)}}, nil
		})
	huma.Register(s.api, withErrors(op("get-workflow-revision", http.MethodGet, "/api/workflows/{name}/revisions/{revision}", starflowtype.RoleViewer,
		"Read one stored revision of a workflow, spec and source included", "definitions"), http.StatusNotFound),
		func(ctx context.Context, in *RevisionParam) (*definitionOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			d, err := s.store.GetDefinition(ctx, &state.GetDefinitionParams{WorkspaceID: s.engine.ScopeOf(ctx).Workspace,
				Name: in.Name, Revision: strings.ToLower(in.Revision)})
			if errors.Is(err, starflowtype.ErrNotFound) {
				return nil, huma.Error404NotFound(fmt.Sprintf("workflow %q has no revision %s", in.Name, in.Revision))
			}
			if err != nil {
				return nil, s.fail(err)
			}
			return &definitionOutput{d}, nil
		})
	huma.Register(s.api, withSource(op("validate-workflow", http.MethodPost, "/admin/validate", starflowtype.RoleViewer,
		"Validate a definition without storing it: every problem with its line and column", "definitions")),
		func(ctx context.Context, in *SourceBody) (*validationOutput, error) {
			_, err := s.engine.Parse(in.filename("workflow"), in.RawBody)
			v := &api.Validation{Valid: err == nil, Errors: []api.ValidationError{}}
			var verrs workflow.Errors
			switch {
			case err == nil:
			case errors.As(err, &verrs):
				for _, e := range verrs {
					v.Errors = append(v.Errors, api.ValidationError{Line: e.Line, Column: e.Column, Message: e.Msg})
				}
			default:
				v.Errors = append(v.Errors, api.ValidationError{Message: err.Error()})
			}
			return &validationOutput{v}, nil
		})
	huma.Register(s.api, withSource(op("plan-workflow", http.MethodPost, "/api/workflows/{name}/plan", starflowtype.RoleViewer,
		"Plan a deploy: which in-flight runs could move onto the new revision and which it would strand (writes nothing)", "definitions")),
		func(ctx context.Context, in *namedSourceInput) (*planOutput, error) {
			if err := wholeWorkspace(ctx, "deploy plans (of runs of every env)"); err != nil {
				return nil, err
			}
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			p, err := s.engine.Plan(ctx, in.filename(in.Name), in.RawBody)
			if err != nil {
				return nil, s.fail(err)
			}
			if p.Workflow != in.Name {
				return nil, huma.Error422UnprocessableEntity(fmt.Sprintf("the definition is named %q but the path names %q", p.Workflow, in.Name))
			}
			return &planOutput{p}, nil
		})
}

// summaries are definitions without their spec and source (listings).
func summaries(defs []*starflowtype.Definition) []*starflowtype.Definition {
	out := make([]*starflowtype.Definition, len(defs))
	for i, d := range defs {
		c := *d
		c.Spec, c.Source = nil, ""
		out[i] = &c
	}
	return out
}
