package plan

// IndexKind is the value of an index's "kind".
const IndexKind = "PlanIndex"

// IndexFile is the name of the index in a plan directory. It cannot be a
// plan's file name: a node name (DNS-1123) has no '_', so no node's
// FileName is "_index.json" (a node named "index" has "index.json").
const IndexFile = "_index.json"

// LegacyIndexFile is the index of plan directories that compiles before
// IndexFile wrote. Readers fall back to it; compile replaces it.
const LegacyIndexFile = "index.json"

// Index lists the plans of a compiled plan directory.
type Index struct {
	FormatVersion string       `json:"formatVersion"`
	Kind          string       `json:"kind"`
	Cluster       string       `json:"cluster"`
	Plans         []IndexEntry `json:"plans"`
	// Parts are the shared parts the plans name, in name order.
	Parts []IndexPart `json:"parts"`
}

// IndexPart is one shared part of an index.
type IndexPart struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"` // RouteTable, RouteShard or ProgramChunk
	File   string `json:"file"` // relative to the index: PartFileName(name)
	Digest string `json:"digest"`
}

// IsPartFile reports whether the entry names a part by a name compile
// gives, in its file beside the index.
func (e IndexPart) IsPartFile() bool {
	return CheckPartName(e.Name) == nil && e.File == PartFileName(e.Name)
}

// IndexEntry is one plan of an index.
type IndexEntry struct {
	Node   string `json:"node"`
	File   string `json:"file"` // relative to the index
	Digest string `json:"digest"`
}
