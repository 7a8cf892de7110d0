package api

import (
	"time"

	"github.com/starflow/starflow"
)

// ScheduleList is the body of GET /api/schedules and of the pause and
// resume answers: schedules by workflow and index, each with its next
// fire times (starflow.Schedule).
type ScheduleList struct {
	Schedules []*starflow.Schedule `json:"schedules"`
	// Now is when the server answered (its clock), to read the next
	// fire times against.
	Now time.Time `json:"now"`
}
