package client

import (
	"context"
	"net/url"
	"strconv"

	"github.com/starflow/starflow/api"
)

// Schedules lists the schedules of the caller's workspace (viewer): of
// one workflow when workflow is set, each with its next next fire times
// (0: the server's default, 3; at most 50).
func (c *Client) Schedules(ctx context.Context, workflow string, next int) (*api.ScheduleList, error) {
	q := url.Values{}
	if workflow != "" {
		q.Set("workflow", workflow)
	}
	if next > 0 {
		q.Set("next", strconv.Itoa(next))
	}
	out := &api.ScheduleList{}
	return out, c.get(ctx, "/api/schedules", q, out)
}

// PauseSchedules pauses a workflow's schedules (operator) and returns
// them. A *api.Problem with status 404 when there is no such workflow.
func (c *Client) PauseSchedules(ctx context.Context, workflow string) (*api.ScheduleList, error) {
	out := &api.ScheduleList{}
	return out, c.post(ctx, "/api/schedules/"+esc(workflow)+"/pause", nil, out)
}

// ResumeSchedules resumes a workflow's schedules (operator) and returns
// them.
func (c *Client) ResumeSchedules(ctx context.Context, workflow string) (*api.ScheduleList, error) {
	out := &api.ScheduleList{}
	return out, c.post(ctx, "/api/schedules/"+esc(workflow)+"/resume", nil, out)
}
