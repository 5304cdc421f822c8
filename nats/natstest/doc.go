// Package natstest runs JetStream servers in-process for tests: a single
// server (RunServer) and an n-node cluster (RunCluster), both with fsync
// on every write, random loopback ports, data in t.TempDir() and cleanup
// at the end of the test. They are the embedded server of package nats,
// the one serpent run uses.
//
// Set NATSTEST_LOG=1 to see the cluster nodes' warnings and errors on
// stderr.
package natstest
