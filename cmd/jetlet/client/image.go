package client

import "github.com/spf13/cobra"

// newImageCommand is `jetlet image`: the images of a node's embedded runtime
// and of the fleet's object store (docs/contract.md section 13).
func newImageCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Images: import into a node, push to and list the fleet's object store",
	}
	cmd.AddCommand(newImageImportCommand(), newImagePushCommand(), newImageListCommand())
	return cmd
}
