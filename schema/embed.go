// Package schema embeds the CUE schema of the intent (#Intent, #Cluster).
// `hnsplan schema` prints it so users can vendor it into their own CUE module.
package schema

import _ "embed"

// Filename is the name the embedded schema carries in error positions. It
// is not a path on disk, so positions inside the schema are easy to tell
// from positions in the user's files.
const Filename = "hnsplan:schema/cluster.cue"

// Source is the text of the schema, package schema.
//
//go:embed cluster.cue
var Source []byte
