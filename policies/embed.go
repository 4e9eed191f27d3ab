// Package policies embeds the catalog of constraint rules (CUE, one file
// per family). compiler/intent evaluates it; this package imports no CUE.
package policies

import "embed"

// FS holds schema.cue and one <family>.cue file per rule family.
//
//go:embed *.cue
var FS embed.FS

// A Rule is one entry of the catalog.
type Rule struct {
	ID         string   `json:"id"`
	Family     string   `json:"family"`
	Severity   string   `json:"severity"` // default: "error", "warning" or "info"
	Phase      string   `json:"phase"`    // "load", "vet" or "policy"
	Summary    string   `json:"summary"`
	Remedy     string   `json:"remedy"`
	References []string `json:"references"`
}

// Overridable reports whether cluster.constraints may change r's severity:
// the loader's own rules (schema, syntax, ...) describe input that cannot be
// read at all, and stay errors.
func (r Rule) Overridable() bool { return r.Phase != "load" }
