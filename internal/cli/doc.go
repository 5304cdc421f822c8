// Package cli is the serpent program: Run parses a command line and runs
// one subcommand, each in a file of its own (run.go lists them), and
// ExitCode turns what Run returned into the process's exit code.
// cmd/serpent only wires Run to the process.
//
// It is where the program is wired: it opens NATS connections, provisions
// streams and buckets, and hands the engine its JetStream adapters (package
// nats). So it imports the NATS client, which the engine and the pure
// packages do not.
package cli
