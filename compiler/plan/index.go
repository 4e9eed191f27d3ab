package plan

import "encoding/json"

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

// IndexEntry is one plan of an index. Format 2 writes it as the node's
// name alone: its file is FileName(Node), and the plan carries its own
// digest. Entries cost some 16 bytes, so the index of a 5,000-node cluster
// stays well under MaxPartSize (with a file and a digest each, it was
// 730 KB). An entry of a format-1 index, an object with node, file and
// digest, is still read (compile into an old directory removes its stale
// plans).
type IndexEntry struct {
	Node   string
	File   string // relative to the index
	Digest string // only in format-1 indexes
}

// MarshalJSON writes the entry as its node's name.
func (e IndexEntry) MarshalJSON() ([]byte, error) { return json.Marshal(e.Node) }

// UnmarshalJSON reads a node's name, or a format-1 entry object.
func (e *IndexEntry) UnmarshalJSON(b []byte) error {
	var node string
	if err := json.Unmarshal(b, &node); err == nil {
		*e = IndexEntry{Node: node, File: FileName(node)}
		return nil
	}
	var v1 struct{ Node, File, Digest string }
	if err := json.Unmarshal(b, &v1); err != nil {
		return err
	}
	*e = IndexEntry{Node: v1.Node, File: v1.File, Digest: v1.Digest}
	return nil
}
