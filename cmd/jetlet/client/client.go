package client

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	jc "github.com/jetlet/jetlet/client"
	"github.com/jetlet/jetlet/cmd/jetlet/internal/cli"
	"github.com/jetlet/jetlet/schemas"
)

// defaultClientURL is where the client commands look for NATS: the address
// `jetlet run` listens on with its embedded server.
const defaultClientURL = jc.DefaultURL

// clientFlags are the flags every client command takes.
type clientFlags struct {
	nats          cli.NATSFlags
	dataDir       string
	subjectPrefix string
	node          string
	connectWait   time.Duration
	// longLived keeps reconnecting after the first connect (events --follow):
	// a NATS restart must not end a follow.
	longLived bool
}

func (f *clientFlags) register(fs *pflag.FlagSet) {
	f.nats.Register(fs, defaultClientURL)
	fs.StringVar(&f.dataDir, "data-dir", "./jetlet-data", "data dir of `jetlet run`, whose "+cli.ClientSeedFile+" seed is used when no other NATS credentials are given")
	fs.StringVar(&f.subjectPrefix, "subject-prefix", schemas.DefaultSubjectPrefix, "first token of every jetlet subject")
	fs.StringVar(&f.node, "node", "", "node name (a DNS-1123 label)")
	fs.DurationVar(&f.connectWait, "connect-timeout", 5*time.Second, "how long to wait for NATS to answer")
}

func (f *clientFlags) validate() error {
	if f.node != "" && !schemas.ValidNodeName(f.node) {
		return fmt.Errorf("--node %q: not a DNS-1123 label (lower-case letters, digits and '-', at most 63)", f.node)
	}
	return nil
}

// connectClient connects once, without retrying: a person is waiting, and a
// NATS that is not there should be reported at once.
func connectClient(cmd *cobra.Command, f *clientFlags) (*jc.Client, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	opts := f.nats.ClientOptions()
	opts.DataDir, opts.SubjectPrefix, opts.ConnectTimeout = f.dataDir, f.subjectPrefix, f.connectWait
	opts.Name, opts.LongLived = "jetlet "+cmd.Name(), f.longLived
	opts.Progress = cmd.ErrOrStderr() // says what it waits for while the cluster elects a leader
	return jc.Connect(cmd.Context(), opts)
}

// Commands are the client commands of the jetlet binary.
func Commands() []*cobra.Command {
	return []*cobra.Command{newApplyCommand(), newCreateCommand(), newDeleteCommand(), newGetCommand(), newEventsCommand(), newHistoryCommand(),
		newDescribeCommand(), newLogsCommand(), newExecCommand(), newAttachCommand(), newPortForwardCommand(), newCopyCommand(), newProvisionCommand(), newNATSConfigCommand(), newNodeCommand(), newImageCommand(), newDiffCommand(), newTopCommand()}
}
