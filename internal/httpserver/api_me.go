package httpserver

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
)

type meOutput struct{ Body *api.Me }

// registerMe adds GET /api/me.
func (s *apiServer) registerMe() {
	huma.Register(s.api, op("get-me", http.MethodGet, "/api/me", starflowtype.RoleViewer,
		"Who the caller is: its key, role, workspace and env, and how the key came (a page shows only the actions the role may do)", "auth"),
		func(ctx context.Context, _ *struct{}) (*meOutput, error) {
			p := principalOf(ctx)
			me := &api.Me{Auth: api.AuthKey, KeyID: p.keyID, KeyName: p.keyName, Role: p.role, Workspace: p.workspace, Env: p.env, Via: p.via}
			if p.keyID == "" {
				me.Auth = api.AuthOpen
			}
			return &meOutput{me}, nil
		})
}
