// Command serpent executes scheduled, paid Google-SERP observations so that
// each is bought at most once. Run "serpent help" for the subcommands; the
// program itself is package internal/cli.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	// Time zones of recurring schedules resolve on machines without a
	// zoneinfo database too.
	_ "time/tzdata"

	"github.com/serpent-engine/serpent/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.Run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "serpent:", err)
		os.Exit(cli.ExitCode(err))
	}
}
