package schemas

import (
	"embed"
	"io/fs"
)

//go:generate go test -run ^TestJSONSchemasUpToDate$ -update .

// Names of the JSON Schemas, one per message (docs/contract.md sections 3 to 6).
const (
	SchemaPodIntent      = "PodIntent"
	SchemaSyncResult     = "SyncResult"
	SchemaLifecycleEvent = "LifecycleEvent"
	SchemaPodStatus      = "PodStatus"
	SchemaNodeRecord     = "NodeRecord"
)

// SchemaNames lists every JSON Schema this package ships.
var SchemaNames = []string{SchemaPodIntent, SchemaSyncResult, SchemaLifecycleEvent, SchemaPodStatus, SchemaNodeRecord}

// SchemaIDBase is the prefix of every schema's $id; a schema's $id is
// SchemaIDBase + name + ".schema.json".
const SchemaIDBase = "https://jetlet.dev/schemas/v1/"

//go:embed *.schema.json
var schemaFiles embed.FS

// SchemaFS holds the JSON Schemas (draft 2020-12) as NAME.schema.json, for
// consumers that want to serve or list them.
var SchemaFS fs.FS = schemaFiles

// JSONSchema returns the JSON Schema (draft 2020-12) of the named message, one
// of SchemaNames, or nil for an unknown name. The schemas are generated from
// the Go types (schemagen_test.go) and check what a JSON Schema can express;
// DecodeIntent checks more (see docs/wire-protocol.md).
func JSONSchema(name string) []byte {
	b, err := schemaFiles.ReadFile(name + ".schema.json")
	if err != nil {
		return nil
	}
	return b
}
