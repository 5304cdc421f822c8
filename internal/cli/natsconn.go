package cli

import (
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
func (f *natsFlags) registerOrEmbed(fs *flag.FlagSet) {
	f.conn.RegisterFlags(fs)
	fs.Lookup("nats-url").Usage = "NATS server URLs, comma-separated (env NATS_URL); none runs an embedded server"
}

// connect connects with the flags, then the environment, then the nats CLI
// context, and returns a JetStream handle.
func (f *natsFlags) connect(env func(string) string, log *slog.Logger, name string) (*natsgo.Conn, jetstream.JetStream, error) {
	f.conn.FromEnv(env)
	f.conn.Name, f.conn.Logger = name, log
	if err := f.conn.Validate(); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
	}
	nc, err := f.conn.Connect()
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, js, nil
}

// configured reports whether anything says where an existing NATS is.
func (f *natsFlags) configured(env func(string) string) bool {
	f.conn.FromEnv(env)
	return len(f.conn.URLs) > 0 || f.conn.Context != ""
}
