package httpserver

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

type healthReportOutput struct{ Body *api.HealthReport }

// registerHealthReport adds GET /api/health.
func (s *apiServer) registerHealthReport() {
	huma.Register(s.api, op("get-health-report", http.MethodGet, "/api/health", starflowtype.RoleViewer,
		"The health page: the store and warm tier (as /healthz), the live runners, this process's recent lease sweeps and the newest recovery events", "health"),
		func(ctx context.Context, _ *struct{}) (*healthReportOutput, error) {
			p := principalOf(ctx)
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			out := &api.HealthReport{Health: s.engine.Health(ctx), Sweeps: visibleSweeps(s.engine.Sweeps(), p)}
			var err error
			if out.Runners, err = s.runners(ctx); err != nil {
				return nil, s.fail(err)
			}
			recs, err := s.store.RecentRecoveries(ctx, &state.RecentRecoveriesParams{WorkspaceID: p.workspace, Env: p.env,
				Limit: state.RecentRecoveriesLimitDefault})
			if err != nil {
				return nil, s.fail(err)
			}
			out.Recoveries = nonNil(recs)
			return &healthReportOutput{out}, nil
		})
}

// runners lists the live runners: the warm tier's presence, with what the
// cold store knows of each (start, concurrency) when it has its row; the
// cold store's rows alone without a warm tier or while it does not
// answer.
func (s *apiServer) runners(ctx context.Context) ([]api.HealthRunner, error) {
	cold, coldErr := s.engine.Runners(ctx)
	byID := map[string]*starflowtype.Runner{}
	for _, r := range cold {
		byID[r.ID] = r
	}
	warm, err := s.engine.LiveRunners(ctx)
	if err == nil {
		out := make([]api.HealthRunner, 0, len(warm))
		for _, w := range warm {
			hr := api.HealthRunner{ID: w.RunnerID, Pools: w.Pools, RunsHeld: w.RunsHeld, SeenAt: w.LastBeat.UTC(), Source: api.SourceWarm}
			if c := byID[w.RunnerID]; c != nil {
				hr.StartedAt, hr.Concurrency = c.StartedAt.UTC(), c.Concurrency
			}
			out = append(out, hr)
		}
		slices.SortFunc(out, func(a, b api.HealthRunner) int { return strings.Compare(a.ID, b.ID) })
		return out, nil
	}
	if !errors.Is(err, starflow.ErrNoWarm) {
		s.cfg.Logger.Warn("api: health: the warm tier's presence could not be read; runners from the cold store", "error", err)
	}
	if coldErr != nil {
		return nil, coldErr
	}
	out := make([]api.HealthRunner, 0, len(cold))
	for _, c := range cold {
		out = append(out, api.HealthRunner{ID: c.ID, Pools: c.Pools, RunsHeld: c.RunsHeld, Concurrency: c.Concurrency,
			StartedAt: c.StartedAt.UTC(), SeenAt: c.LastSeen.UTC(), Source: api.SourceCold})
	}
	return out, nil
}

// visibleSweeps is h with only the recovered runs p may see; a pass left
// with none is dropped (the last pass's time stays: it says the sweep
// runs).
func visibleSweeps(h starflow.SweepHistory, p *principal) starflow.SweepHistory {
	passes := h.Passes[:0]
	for _, ps := range h.Passes {
		ps.Recovered = slices.DeleteFunc(ps.Recovered, func(r starflow.SweepRecovery) bool { return !p.sees(r.WorkspaceID, r.Env) })
		if len(ps.Recovered) > 0 {
			passes = append(passes, ps)
		}
	}
	h.Passes = passes
	return h
}
