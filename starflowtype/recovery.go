package starflowtype

// RecoveryEventTypes are the event types of a run's recovery: its runner
// was lost or it lost its lease (EventLeaseLost: reserved, never written,
// see EventType), it was interrupted (held, or queued again after a
// failure or a lost runner), or it ran out of attempts.
var RecoveryEventTypes = []EventType{EventRunnerLost, EventLeaseLost, EventRunInterrupted, EventRunDeadLettered}

// RecoveryEvent is one recovery event (RecoveryEventTypes) with the env
// and workflow of its run, as the health page lists them.
type RecoveryEvent struct {
	Event
	Env          string `json:"env"`
	WorkflowName string `json:"workflow_name"`
}
