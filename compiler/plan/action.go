package plan

// Action is what a change to a node's HNS does, in Terraform's vocabulary.
// It is the one vocabulary of changes: compiler/diff says it of two plans
// (`hnsplan diff`), applier/hns of HNS and a plan (the agent's ops). It is
// not an ACL's action (ACL.Action: Allow or Block). The zero Action is
// none: a list of changes holds no unset one.
type Action string

const (
	Create  Action = "create"
	Update  Action = "update"
	Delete  Action = "delete"
	Replace Action = "replace" // delete, then create: an immutable property changed
	NoOp    Action = "no-op"
)

// Symbol is the action's mark in text output: "+", "~", "-", "-/+"; " "
// for NoOp and the zero Action.
func (a Action) Symbol() string {
	switch a {
	case Create:
		return "+"
	case Update:
		return "~"
	case Delete:
		return "-"
	case Replace:
		return "-/+"
	}
	return " "
}
