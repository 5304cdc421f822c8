// Package events defines serpent's public event vocabulary: the facts that
// make up a job's history on its own JetStream subject, serp.events.<job_id>.
//
// Every event is an Event envelope (a ULID event id, the job id, the
// aggregate version, the time) around one Payload. A payload type has a
// stable name, such as "AttemptCreated", and a schema version; both are
// written into the encoded JSON, so the log never depends on Go type names
// and an auditor can read it without this code.
//
// A message of the log holds one event, or the events of one append as a
// JSON array (a group: Group, Split, DecodeAll); readers take both.
//
// Decoding is strict. An unknown type, a schema version newer than this code
// knows, unknown fields or malformed data are errors (*DecodeError) that name
// the type, the version and the job. Older versions are brought up to date by
// upcasters registered on a Codec before they are decoded.
//
// Decoding has a fast path: an event as Encode writes it is read in one
// pass, several times faster than encoding/json, which reads everything
// else; both accept and read exactly the same. DecodeLight and
// DecodeAllLight leave an observation's result out, for readers that never
// look at it.
//
// The package is pure: it does no I/O and never reads the clock. Event ids
// and times are given by the caller.
package events
