package cli

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	snats "github.com/serpent-engine/serpent/nats"
)

// natsFlags are the flags of commands that talk to an existing NATS.
type natsFlags struct {
	conn snats.ConnConfig
}

func (f *natsFlags) register(fs *flag.FlagSet) { f.conn.RegisterFlags(fs) }

// registerOrEmbed registers the flags of a command that runs an embedded
// server when no NATS URL is given.
func (f *natsFlags) registerOrEmbed(fs *flag.FlagSet) { f.conn.RegisterFlagsOrEmbed(fs) }

// connect connects with the flags, then the environment, then the nats CLI
// context, and returns a JetStream handle. Bad settings are a usage error.
func (f *natsFlags) connect(env func(string) string, log *slog.Logger, name string) (*natsgo.Conn, jetstream.JetStream, error) {
	nc, js, err := f.conn.Dial(env, log, name)
	if errors.Is(err, snats.ErrConnConfig) {
		err = fmt.Errorf("%w: %w", errUsage, err)
	}
	return nc, js, err
}

// configured reports whether anything says where an existing NATS is.
func (f *natsFlags) configured(env func(string) string) bool { return f.conn.Given(env) }
