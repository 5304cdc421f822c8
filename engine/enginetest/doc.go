// Package enginetest has strict in-memory fakes of the engine's ports and
// the conformance suites that hold them and the JetStream adapters of
// package nats to the same rules: Bucket, a key-value bucket
// (engine.Bucket, engine.WatchBucket), checked by RunBucketTests.
//
// It does not import package engine, so that the engine's own tests can
// use it.
package enginetest
