// Package sim is serpent's deterministic simulation: the real engine
// (engine.Engine, through the delivery handlers its JetStream consumers
// run, and its crash hooks), the real sandbox behind the real client, and
// the strict in-memory event store, run on the fake clock of a
// testing/synctest bubble, with a seeded scheduler deciding everything
// that could happen in either order.
//
// Each task (one delivery of a due job, or of a command, to one worker
// process) runs the code production runs for it: Engine.HandleWork for a
// wake-up on serp.work.<job>, Engine.HandleCommand for a command on
// serp.cmd.schedule and consume.HandleStray for one on a subject nothing
// reads (refused ones recorded through the task's engine.Rejections).
// The delivery is an engine.Msg of the sim's (simMsg): its subject, its
// payload, its place (stream sequence, delivery count, and when the
// server stored it, by the server's clock, which may run ahead of the
// workers': Config.ServerAhead), and its settlements (ack, term, nak with
// its delay, keep-alives) go to the sim's model of the consumers. A
// pluggable Stepper (the naive comparison) is not an engine: its
// deliveries are stepped, and its commands scheduled, by the sim itself.
//
// Each task runs in its own goroutine but only between a resume and its
// next yield: before a load, around an append, before the request leaves
// and after its reply, before a ledger look-up, at the engine's crash
// hooks, before a timer is armed, before a rejection is recorded and
// before the delivery is settled. At every step the scheduler waits until
// every goroutine is blocked (synctest.Wait), then picks, with its own
// seeded source, one parked task to resume or one message to deliver; when
// nothing can happen it lets fake time run to the next event. At each
// resume it may also
//
//   - crash the task's worker process (all its tasks stop where they are;
//     it comes back empty later),
//   - pause the process (SIGSTOP, a long GC), past its lease if it likes,
//   - fail a load or an append (nothing written), or lose an append's
//     reply after it was written (eventstore.ErrUnknownOutcome),
//   - fail a billing ledger look-up, the arming of a timer or the
//     recording of a rejection,
//   - lose or delay an acknowledgement, so the message comes back,
//
// and at each delivery hand the message to a second worker at once, or
// lose its keep-alives so a long request lets it go to another. The
// sandbox adds the provider's faults (dropped connections before and after
// the search, gateway pages, slow searches (past the client's timeout with
// -sim.beyond),
// 408/424/503, billing_unavailable, early cache expiry, rate limits) from
// the same seed. Faults stop after Config.FaultsFor; every job must then
// be finished within Config.Settle.
//
// At the end, every job's log is checked with aggregate.Verify, and the
// provider's own books are checked against the logs: at most one charge
// per job and per body, every charge accounted for by the log, every
// charged or sent key stored by a job, every request of a key after its
// claim and before its deadline, no body changed under a key, every
// command a job or its rejection (a record carrying the command's
// sequence and payload). A world whose fake time stops moving while the
// scheduler keeps turning (a wake-up handed to a worker again and again)
// fails as a livelock.
//
// A seed replays a world exactly (TestDeterminism checks it). A failing
// seed is printed with the command that reruns it alone.
package sim
