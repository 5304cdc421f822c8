// Package nats holds serpent's JetStream adapters: the event store, stream
// provisioning, an embedded server and connection options, and the other
// ports of package engine (timers, the shared buckets, schedule orders).
// It is, with its subpackages, the only code that imports the NATS
// client: nats/consume runs the engine's consumers, nats/service its micro
// service, nats/projector the projections.
//
// # Event store
//
// Every event of a job is on the job's own subject, serp.events.<job_id>,
// in the stream SERP_EVENTS (see EnsureEventStream): a message holds one
// event, or the events of one append (a group, events.Group). A job's
// version is the stream sequence of its last message, 0 for a job without
// events. EventStore implements the event store the engine uses;
// the conformance suite in eventstore/storetest pins its rules down and the
// in-memory fake in eventstore/memstore follows them exactly.
//
// Append(ctx, job, expected, events...) writes:
//
//   - its events as one message, a plain JetStream publish with the
//     headers Nats-Msg-Id (the first event's id),
//     Nats-Expected-Last-Subject-Sequence (expected), Serpent-Event-Type
//     and Serpent-Event-Schema (a group's types and schemas joined by
//     commas), when that message fits (eventstore.Pack);
//   - several events too large for one message as one JetStream atomic
//     batch of a message per event (all or none, at consecutive
//     sequences), with the expected sequence on the first message (the
//     server refuses it on later messages of the same subject) and a
//     Nats-Msg-Id on every one.
//
// Before anything is sent the append is checked: every event belongs to the
// job, encodes, has an id not used twice in the append and a version one
// above the previous (eventstore.ErrInvalid, eventstore.ErrDuplicate), and every
// message, headers and batch headers included, fits in the connection's
// max payload and the stream's max message size (eventstore.ErrTooLarge, naming
// job, type, size and limit). A message exactly at the limit is accepted.
//
// The server's answers are mapped as follows. An answer that does not
// settle the outcome is never taken at its word: the store re-reads the
// job from the stream leader and finds out whether its own events are the
// ones right after the expected version, in whichever form they were
// written (eventstore.Match).
//
//   - acknowledged: done, the version is the acknowledged sequence;
//   - "wrong last sequence" (10071): if the events after expected are ours,
//     the append had landed before (a retry after a lost reply): success
//     with that version; if they are someone else's: eventstore.ErrConcurrency;
//   - a duplicate acknowledgement, or an atomic batch refused for a
//     duplicate message id (10201): ours after expected is success, someone
//     else's is eventstore.ErrConcurrency, nothing new is eventstore.ErrDuplicate (the
//     id is in the log elsewhere, within the 2-minute duplicate window);
//   - "another write to this subject is in flight" (10164), "duplicate
//     message id is in process" (10158), an incomplete or refused batch
//     (10176, too many in flight), a timeout, no responders, a lost
//     connection: re-read; ours is success, someone else's is
//     eventstore.ErrConcurrency, nothing new means retry the same messages (same
//     ids, so the duplicate window makes it safe) after a short, growing
//     backoff. After a bounded number of attempts, or when ctx ends, the
//     append fails with eventstore.ErrUnknownOutcome: repeating it is safe;
//   - a connection closed (the process shutting down): the write may have
//     left before it closed, and nothing can re-read the job on it:
//     eventstore.ErrUnknownOutcome at once.
//
// Load reads a job with batched direct gets filtered by the job's subject
// (no consumer per job), so its cost does not grow with the number of jobs
// in the stream. Every message is decoded strictly; one that does not
// decode, or whose job, id or type disagree with where it is, is a
// *eventstore.CorruptError naming the job and the sequence. In a cluster, direct
// gets may be served by a replica that is a moment behind the leader: an
// append with a version read that way fails with ErrConcurrency, it is
// never written over anything.
//
// AppendMany is group commit: many jobs' appends go in atomic batches of up
// to 1000 messages (the server's default limit), at most one append per
// job per batch. If a batch is refused, for example because one job's
// expected version is stale, each of its appends is retried alone, so only
// the conflicting one fails. A small group of one-message appends (up to
// DefaultPipelineMax, EventStoreOptions.PipelineMax) goes as plain
// messages, all in flight at once, each settled like a single append: a
// single server stages every atomic batch in a file store of its own,
// which costs more than a few plain writes.
//
// # Reading the log
//
// Log is the one reader of a stream in order, which the projections, the
// tally's fold, the audit and the chaos runs share: Get reads a range
// with batched direct gets (a gap in a consumer's deliveries, or a job's
// history), Read a range with an ordered consumer (a replay or a
// rebuild), and Follow goes on as the stream grows. DecodeEvents reads a
// message's events strictly and checks they are stored where they
// belong. AuditLog is the log as serpent audit reads it (audit.Log),
// decoded in parallel while it is read.
//
// # Leases
//
// Lease is a claim on one KV key that one process holds at a time, taken
// and renewed with compare-and-set writes: the projection runner's lease
// and a rebuild's locks (judged by a revision that stands still for a
// TTL, no clocks compared), and the engines' turns at the sweep for lost
// timers (judged by the time written in the record, by the server's
// clock).
//
// # The engine's other ports
//
// Timers arms job and schedule timers as JetStream message schedules on
// SERP_WORK, and says which jobs and schedules have one waiting (the
// sweep of lost timers reads SERP_WORK's index of subjects for that). KV
// is a KV bucket as the engine shares state through it (serp_accounts,
// serp_schedules): a value's revision is its stream sequence, and a
// conditional write a compare-and-set on it; the conformance suite in
// engine/enginetest holds it and the in-memory fake to the same rules.
// Orders publishes the commands of recurring schedules' slots on
// serp.cmd.schedule, with their message id.
//
// # Servers and connections
//
// StartEmbedded runs a JetStream server in-process (serpent run without a
// NATS URL, and the tests), fsyncing every write by default and listening
// on a loopback address only, since it has no authentication. ConnConfig
// holds the usual ways to reach an existing server (URLs, creds, nkey,
// user and password, token, TLS, a nats CLI context).
package nats
