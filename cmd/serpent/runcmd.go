package main

import (
	"context"
	"fmt"
	"io"
)

func init() {
	register(command{name: "run", summary: "run the engine", run: runEngine})
}

// runEngine will start the engine; until the engine exists it explains
// what serpent is and lists the commands.
func runEngine(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	fmt.Fprintln(stdout, "serpent run: the engine is not part of this build yet; these commands are:")
	fmt.Fprintln(stdout)
	return runHelp(ctx, nil, env, stdout, stderr)
}
