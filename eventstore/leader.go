package eventstore

import (
	"context"

	"github.com/serpent-engine/serpent/events"
)

// Loader is a store's read side.
type Loader interface {
	Load(ctx context.Context, jobID string) ([]events.Event, uint64, error)
}

// LeaderVersioner is a store whose loads may trail the log (on a cluster,
// any replica answers the direct gets the JetStream store loads with) and
// that can read a job's version from the log's leader instead.
type LeaderVersioner interface {
	LeaderVersion(ctx context.Context, jobID string) (uint64, error)
}

// LeaderVersion is a job's version as the log's leader has it: asked of s
// if it can answer, else loaded (a store that cannot answer is one whose
// loads do not trail).
func LeaderVersion(ctx context.Context, s Loader, jobID string) (uint64, error) {
	if l, ok := s.(LeaderVersioner); ok {
		return l.LeaderVersion(ctx, jobID)
	}
	_, v, err := s.Load(ctx, jobID)
	return v, err
}
