package httpserver

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/starflow/starflow"
	"github.com/starflow/starflow/api"
	"github.com/starflow/starflow/starflowtype"
	"github.com/starflow/starflow/state"
)

type scheduleListOutput struct{ Body *api.ScheduleList }

type listSchedulesInput struct {
	Workflow string `query:"workflow" maxLength:"200" doc:"Only the schedules of this workflow."`
	Next     int    `query:"next" minimum:"1" maximum:"50" default:"3" doc:"How many next fire times to give each schedule."`
}

type scheduleWorkflowParam struct {
	Workflow string `path:"workflow" minLength:"1" maxLength:"200" doc:"The workflow whose schedules to pause or resume."`
}

func (s *apiServer) registerSchedules() {
	huma.Register(s.api, withErrors(op("list-schedules", http.MethodGet, "/api/schedules", starflowtype.RoleViewer,
		"List the schedules of the workflows' current revisions, with their next fire times, last tick and last run", "schedules"),
		http.StatusNotImplemented),
		func(ctx context.Context, in *listSchedulesInput) (*scheduleListOutput, error) {
			ctx, cancel := s.ctx(ctx)
			defer cancel()
			list, err := s.engine.Schedules(ctx, in.Workflow, in.Next)
			if err != nil {
				return nil, s.scheduleFail(err)
			}
			if p := principalOf(ctx); p != nil && p.env != "" {
				// A key limited to an env sees the schedules that start
				// runs in it.
				kept := list[:0]
				for _, sc := range list {
					if sc.Env == p.env {
						kept = append(kept, sc)
					}
				}
				list = kept
			}
			return &scheduleListOutput{&api.ScheduleList{Schedules: nonNil(list), Now: time.Now().UTC()}}, nil
		})
	pause := func(id, verb, summary string, fn func(*starflow.Engine, context.Context, string) ([]*starflow.Schedule, error)) {
		huma.Register(s.api, withErrors(op(id, http.MethodPost, "/api/schedules/{workflow}/"+verb, starflowtype.RoleOperator, summary, "schedules"),
			http.StatusNotFound, http.StatusNotImplemented),
			func(ctx context.Context, in *scheduleWorkflowParam) (*scheduleListOutput, error) {
				if err := wholeWorkspace(ctx, "a workflow's schedules"); err != nil {
					return nil, err
				}
				ctx, cancel := s.ctx(ctx)
				defer cancel()
				list, err := fn(s.engine, ctx, in.Workflow)
				if err != nil {
					return nil, s.scheduleFail(err)
				}
				return &scheduleListOutput{&api.ScheduleList{Schedules: nonNil(list), Now: time.Now().UTC()}}, nil
			})
	}
	pause("pause-schedules", "pause",
		"Pause a workflow's schedules: no tick fires until resumed; the pause covers revisions applied meanwhile", (*starflow.Engine).PauseSchedules)
	pause("resume-schedules", "resume",
		"Resume a workflow's schedules: ticks that fell due while paused never fire; the next tick after now does", (*starflow.Engine).ResumeSchedules)
}

// scheduleFail is fail, with a store that keeps no schedules (nullstore)
// answered 501.
func (s *apiServer) scheduleFail(err error) error {
	if errors.Is(err, state.ErrNotImplemented) {
		return huma.Error501NotImplemented(err.Error())
	}
	return s.fail(err)
}
