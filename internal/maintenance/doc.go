// Package maintenance holds the background services that keep the cold
// store healthy and recover from failures: the lease sweep (LeaseSweep), the
// durable timer poller (TimerPoller), the notify retrier (NotifyRetrier),
// the session-variable GC (SessionGC), the stuck watch (StuckWatch: the
// why-stuck metrics), the scheduler (Scheduler: definitions'
// schedules) and retention (RetentionGC: what is older than the
// configured ages). A Leader runs them in one process at a time: it campaigns for the maintenance leadership
// (state.Elector) and starts fresh services for each term it wins,
// stopping them when the term ends.
//
// Every service has one lifecycle: Start(ctx) returns at once, Stop(ctx)
// waits for the service to finish its current pass, and stopping twice is
// safe. Logger and clock are injected.
//
// Import rule: imports state, starflowtype and workflow (cron
// expressions); never a concrete store or the engine.
package maintenance
