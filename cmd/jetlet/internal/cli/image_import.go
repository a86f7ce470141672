package cli

// ImageImportSocket is the unix socket, in the data dir, on which `jetlet
// run` with the embedded runtime takes `jetlet image import`'s archives.
const ImageImportSocket = "image-import.sock"

// ImportedImage is one image an import loaded, as the socket answers it.
type ImportedImage struct {
	ID       string   `json:"id"`
	RepoTags []string `json:"repoTags,omitempty"`
	Size     uint64   `json:"size"`
}
