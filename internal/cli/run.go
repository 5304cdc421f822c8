package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
)

// command is one subcommand of the serpent binary.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error
}

// commands lists every subcommand; each lives in a file of its own.
func commands() []command {
	cmds := []command{
		{name: "help", summary: "show this help, or the help of a subcommand", run: runHelp},
		{name: "version", summary: "print the version", run: runVersion},
	}
	cmds = append(cmds, extraCommands...)
	sort.Slice(cmds, func(i, j int) bool { return cmds[i].name < cmds[j].name })
	return cmds
}

// extraCommands is filled by the init functions of the subcommand files.
var extraCommands []command

func register(c command) { extraCommands = append(extraCommands, c) }

// exitError carries a process exit code; it is how a subcommand reports
// "ran fine, but found a problem" (for example an audit violation).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// errUsage marks a mistake in how the command was called.
var errUsage = errors.New("usage")

// ExitCode is the process exit code for what Run returned.
func ExitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// Run is the whole program: cmd/serpent only wires it to the process.
func Run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return runHelp(ctx, nil, env, stdout, stderr)
	}
	name := args[0]
	if name == "-h" || name == "--help" || name == "-help" {
		name = "help"
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], env, stdout, stderr)
		}
	}
	return fmt.Errorf("%w: unknown command %q (run \"serpent help\")", errUsage, name)
}

func runHelp(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		for _, c := range commands() {
			if c.name == args[0] && c.name != "help" {
				return c.run(ctx, []string{"-h"}, env, stdout, stderr)
			}
		}
		return fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	var b strings.Builder
	b.WriteString("serpent buys scheduled Google-SERP observations from the Serper.live API:\neach at most once, none lost.\n\n")
	b.WriteString("Usage: serpent <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(&b, "  %-12s %s\n", c.name, c.summary)
	}
	b.WriteString("\nRun \"serpent help <command>\" for the flags of a command.\n")
	_, err := io.WriteString(stdout, b.String())
	return err
}

// parseFlags parses a command that takes flags only: a word that is no
// flag (a day or a job id without its flag) is refused, not ignored.
func parseFlags(fs *flag.FlagSet, args []string) error {
	pos, err := parseArgs(fs, args)
	if err == nil && len(pos) > 0 {
		err = fmt.Errorf("takes flags only, not %q (see -h)", strings.Join(pos, " "))
	}
	return err
}

// parseArgs parses flags that may come before or after the positional
// arguments ("serpent cancel JOB --reason r"), which the flag package alone
// stops at; it returns the positional arguments.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}
