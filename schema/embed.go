// Package schema embeds the CUE schema of the intent (#Intent, #Cluster).
// `hnsplan schema` prints it so users can vendor it into their own CUE module.
// It also embeds the schema of the plan files (#NodePlan, the shared parts
// #RouteTable, #RouteShard and #ProgramChunk, #PlanIndex), which tests
// validate every emitted file against.
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

// PlanFilename is the name the embedded plan schema carries in error
// positions.
const PlanFilename = "hnsplan:schema/plan.cue"

// PlanSource is the text of the plan schema (#NodePlan, its parts, #PlanIndex),
// package schema. It refers to definitions of Source (#Networking): compile
// the two files together.
//
//go:embed plan.cue
var PlanSource []byte
