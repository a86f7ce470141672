package atomicfile

import (
	"encoding/json"
	"fmt"
	"os"
)

// WriteJSON writes v as indented JSON to path with Write, mode 0600.
func WriteJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return Write(path, append(data, '\n'), 0o600)
}

// ReadJSON reads the JSON record at path into v; a record that does not parse
// is an error naming the file.
func ReadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("corrupt record %s: %w", path, err)
	}
	return nil
}
