package hnswin

import (
	"fmt"

	"github.com/hnsplan/hnsplan/applier/hns"
)

// verb names an action in errors: its word, or an unknown one quoted.
func verb(a hns.Action) string {
	switch a {
	case hns.Create, hns.Update, hns.Delete, hns.Replace:
		return string(a)
	}
	return fmt.Sprintf("action %q", string(a))
}

// opName names an op in errors: `replace network "flannel.4096"`,
// `create route "10.244.2.0/24" on "flannel.4096"`.
func opName(op hns.Op) string {
	s := fmt.Sprintf("%s %s %q", verb(op.Action), op.Kind, op.Name)
	if op.Network != "" && op.Kind != hns.KindNetwork {
		s += fmt.Sprintf(" on %q", op.Network)
	}
	return s
}

// errUnsupportedOp is the error of an action an op kind does not have.
func errUnsupportedOp(op hns.Op) error {
	return fmt.Errorf("cannot %s a %s", verb(op.Action), op.Kind)
}
