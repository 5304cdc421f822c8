// Package bench is serpent bench: it measures JetStream's raw publish
// rates, the engine end to end (a burst, a steady pace, a fault mix),
// the audit's replay and the projections' rebuild, loads at scale, and
// the engine's memory, on embedded servers of its own or an existing one.
// Run takes the program whose engine it measures (cli.Run); the engine of
// the scale and inflight phases runs as a child process of the serpent
// binary.
//
// It imports the NATS client because JetStream itself is one of the
// things it measures, and it seeds and reads servers of its own.
package bench
