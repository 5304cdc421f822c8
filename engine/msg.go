package engine

import "time"

// Msg is one delivery of a message from a durable queue: a JetStream
// consumer's in production (package nats), the simulation's in package
// sim. A handler settles each delivery once: it acknowledges it when its
// work is durable, asks for it again later, or drops it; a delivery left
// unsettled comes again after its ack wait.
type Msg interface {
	// Subject is the subject the message was published on.
	Subject() string
	// Data is the message's payload.
	Data() []byte
	// Info says where the message is stored and how often it came.
	Info() (MsgInfo, error)
	// Ack settles the delivery: its work is done.
	Ack() error
	// NakWithDelay hands the delivery back, to come again after d.
	NakWithDelay(d time.Duration) error
	// InProgress tells the queue the delivery is still being worked on,
	// so that it is not handed to another worker meanwhile.
	InProgress() error
	// Term drops the message: it never comes again.
	Term() error
}

// MsgInfo is where a message is stored, and how often it was delivered.
type MsgInfo struct {
	// Stream and Seq place the message: its stream, its sequence there.
	Stream string
	Seq    uint64
	// Delivered counts its deliveries, this one included.
	Delivered uint64
	// Stored is when the server stored it, by the server's clock (a
	// timer's wake-up: when the timer fired); zero if unknown.
	Stored time.Time
	// AckWait is how long the queue waits for a sign of life from the
	// delivery before it delivers the message again; zero if unknown.
	AckWait time.Duration
}
