package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// EnvName is the environment variable of a flag: --data-dir is JETLET_DATA_DIR.
func EnvName(flag string) string {
	return "JETLET_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// BindEnv sets every flag of cmd that was not given on the command line from
// its environment variable, if set. The command line wins.
func BindEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed {
			return
		}
		v, ok := os.LookupEnv(EnvName(f.Name))
		if !ok {
			return
		}
		if setErr := f.Value.Set(v); setErr != nil {
			err = fmt.Errorf("%s=%q: %w", EnvName(f.Name), v, setErr)
			return
		}
		f.Changed = true
	})
	return err
}

// AnnotateEnv appends the environment variable to each flag's usage line.
func AnnotateEnv(fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [" + EnvName(f.Name) + "]"
	})
}
