package plan

// IndexKind is the value of an index's "kind".
const IndexKind = "PlanIndex"

// IndexFile is the name of the index in a plan directory.
const IndexFile = "index.json"

// Index lists the plans of a compiled plan directory.
type Index struct {
	FormatVersion string       `json:"formatVersion"`
	Kind          string       `json:"kind"`
	Cluster       string       `json:"cluster"`
	Plans         []IndexEntry `json:"plans"`
}

// IndexEntry is one plan of an index.
type IndexEntry struct {
	Node   string `json:"node"`
	File   string `json:"file"` // relative to the index
	Digest string `json:"digest"`
}
