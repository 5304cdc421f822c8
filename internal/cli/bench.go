package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/serpent-engine/serpent/internal/bench"
)

func init() {
	register(command{name: "bench", summary: bench.Summary, run: runBench})
}

// runBench is serpent bench, the harness of package bench, measuring this
// program's engine.
func runBench(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	err := bench.Run(ctx, args, env, stdout, stderr, Run)
	if errors.Is(err, bench.ErrUsage) {
		err = fmt.Errorf("%w: %w", errUsage, err)
	}
	return err
}
