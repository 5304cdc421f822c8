package enginetest_test

import (
	"testing"

	"github.com/serpent-engine/serpent/engine"
	"github.com/serpent-engine/serpent/engine/enginetest"
)

var (
	_ engine.WatchBucket = (*enginetest.Bucket)(nil)
	_ enginetest.KV      = engine.WatchBucket(nil)
)

func TestBucket(t *testing.T) {
	enginetest.RunBucketTests(t, func(*testing.T) enginetest.KV { return enginetest.NewBucket() })
}
