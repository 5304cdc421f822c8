package nats

// Headers of a rejection record on serp.rejected.<reason>. The message body
// is the command's payload, byte for byte (its first bytes only, with its
// size and digest in headers, if the record would otherwise outgrow a
// message).
const (
	HeaderRejectReason = "Serpent-Reject-Reason"
	HeaderRejectError  = "Serpent-Reject-Error"
	HeaderRejectFields = "Serpent-Reject-Fields"
	// HeaderRejectFieldsOmitted counts the field errors left out of
	// Serpent-Reject-Fields to keep it within its 2 KB.
	HeaderRejectFieldsOmitted = "Serpent-Reject-Fields-Omitted"
	HeaderCommandSubject      = "Serpent-Command-Subject"
	HeaderCommandSeq          = "Serpent-Command-Seq"
	// HeaderCommandBytes and HeaderCommandSHA256 describe the whole
	// command when the record keeps only its first bytes (a command too
	// large for a record with headers of its own).
	HeaderCommandBytes  = "Serpent-Command-Bytes"
	HeaderCommandSHA256 = "Serpent-Command-Sha256"
)
