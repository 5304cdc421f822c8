package projections_test

import (
	"testing"

	"github.com/serpent-engine/serpent/events"
	"github.com/serpent-engine/serpent/projections"
	"github.com/serpent-engine/serpent/projections/projectionstest"
)

var t0 = projectionstest.T0

func sampleLog(t testing.TB) [][]events.Event { return projectionstest.SampleLog(t) }

func interleave(jobs [][]events.Event) []projections.Record { return projectionstest.Interleave(jobs) }

func result(id string, pages int) []byte { return projectionstest.Result(id, pages) }
