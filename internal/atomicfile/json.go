package atomicfile

import (
	"encoding/json"
	"fmt"
	"os"
)

// WriteJSON writes v as indented JSON to path with Write, mode 0600.
func WriteJSON(path string, v any) error {
	return writeJSON(path, v, true)
}

// ReplaceJSON is WriteJSON with Replace: for a record made anew before each
// use, that no one reads once the processes it was made for have ended (a
// container's spec, read by its shim at the start).
func ReplaceJSON(path string, v any) error {
	return writeJSON(path, v, false)
}

func writeJSON(path string, v any, durable bool) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return write(path, append(data, '\n'), 0o600, durable)
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
