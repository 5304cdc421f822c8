// Package memstore is an in-memory event store exactly as strict as the
// JetStream store in package nats, for unit tests and deterministic
// simulations. Both pass the conformance suite in eventstore/storetest.
//
// It keeps JetStream's semantics, not just its interface:
//
//   - one global sequence counter over all jobs; a job's version is the
//     sequence of its last event, so versions of one job are increasing but
//     not consecutive;
//   - an append is checked against the job's last sequence (the expected
//     version, 0 for a new job) and refused with eventstore.ErrConcurrency if the
//     job moved on, unless the events right after the expected version are
//     exactly the ones being appended: then the append already happened (a
//     retry after a lost reply) and it returns that version;
//   - event ids are remembered for a duplicate window (2 minutes, as the
//     SERP_EVENTS stream); an id seen there at another place gives
//     eventstore.ErrDuplicate;
//   - several events are written all or none, at consecutive sequences;
//   - messages are sized like NATS messages (headers included) and refused
//     over the limit (1 MiB by default, NATS's default max_payload) with
//     eventstore.ErrTooLarge;
//   - events are stored encoded and decoded strictly on Load, so anything
//     the JetStream store would reject on reading is rejected here too.
//
// Hooks inject faults for simulations: BeforeAppend fails an append before
// it is looked at, AfterAppend fails it after it was written ("the write
// landed but the reply was lost").
package memstore
