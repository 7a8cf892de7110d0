package workflow

import (
	"encoding/json"
	"time"
)

// Job hands a step to a remote worker (issue 15, SPEC §9): the step
// instance becomes a row of worker_jobs and the run parks durably, holding
// no runner, until a process serving Type over HTTP (POST /api/jobs/poll,
// docs/api.md "Remote workers") completes or fails it. The step's output is
// the worker's output; a failure fails the step with the worker's typed
// error. The step's retry_policy counts the job's tries (a lease that
// expired is a try too); its retry_on decides which failures are tried
// again.
type Job struct {
	// Type names what the job does; workers poll for it. 1 to 200
	// characters of [A-Za-z0-9_.:/-].
	Type string `json:"type"`
	// Input is a template of the job's input (any JSON value; default {}).
	// It is stored in worker_jobs.input_json with secrets masked, like
	// every stored value: a worker that needs a secret holds it itself.
	Input any `json:"input,omitempty"`
	// Timeout bounds the whole job, every try and the waits for a worker
	// included, from the moment it is queued; when it passes the step
	// fails with error type timeout. 0 = no limit.
	Timeout Duration `json:"timeout,omitempty"`
	// HeartbeatTimeout is the lease a claim and each heartbeat grant: a
	// worker silent for longer loses the job, which the sweep queues
	// again (a try). 0 = JobHeartbeatTimeoutDefault.
	HeartbeatTimeout Duration `json:"heartbeat_timeout,omitempty"`
}

// JobHeartbeatTimeoutDefault is Job.HeartbeatTimeout when not set.
const JobHeartbeatTimeoutDefault = Duration(30 * time.Second)

// JobHeartbeatTimeoutMin is the shortest Job.HeartbeatTimeout: a worker
// heartbeats over HTTP, and a lease shorter than a round trip or two
// would expire under a live worker.
const JobHeartbeatTimeoutMin = Duration(time.Second)

// jobFields are Job's fields, in the order messages list them.
var jobFields = []string{"type", "input", "timeout", "heartbeat_timeout"}

// MarshalJSON writes the job; template values keep their JSON type.
func (j Job) MarshalJSON() ([]byte, error) {
	type plain Job
	c := plain(j)
	c.Input = canonValue(c.Input)
	return json.Marshal(c)
}

func (d *decoder) job(n *vnode, at Pos) *Job {
	j := &Job{}
	seen := map[string]bool{}
	if !d.fields(n, "job", jobFields, func(p vpair) {
		seen[p.key] = true
		v := p.val
		switch p.key {
		case "type":
			s, ok := d.str(v, "job.type")
			if !ok {
				return
			}
			if !ValidSignal(s) {
				d.errorf(v.pos, "job.type %q must be 1 to 200 characters of letters, digits and _ . : / - (and not start with %q)", s, ReservedSignalPrefix)
			}
			j.Type = s
		case "input":
			j.Input = d.template(v, "job.input")
		case "timeout":
			j.Timeout, _ = d.duration(v, "job.timeout")
		case "heartbeat_timeout":
			if j.HeartbeatTimeout, _ = d.duration(v, "job.heartbeat_timeout"); j.HeartbeatTimeout > 0 && j.HeartbeatTimeout < JobHeartbeatTimeoutMin {
				d.errorf(v.pos, "job.heartbeat_timeout %s is too short: at least %s", v.s, time.Duration(JobHeartbeatTimeoutMin))
			}
		}
	}) {
		return j
	}
	d.required(at, "job", seen, "type")
	return j
}
