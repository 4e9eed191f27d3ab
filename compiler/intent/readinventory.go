package intent

import "github.com/hnsplan/hnsplan/compiler/diag"

// ReadInventory reads opts.Inventory as Load does — each file under
// opts.MaxFileSize, one that cannot be read a *PathError — and returns it
// with its findings, unsorted. Load of the same directory without
// opts.Inventory, with this Inventory set on the intent and these findings
// added and sorted, is Load with it: a caller that loads several intents
// with one inventory (the two sides of `hnsplan diff`) reads it once. The
// Inventory is then shared: nothing may change it.
func ReadInventory(opts Options) (Inventory, diag.List, error) {
	max := opts.MaxFileSize
	if max <= 0 {
		max = DefaultMaxFileSize
	}
	var errs diag.List
	inv, err := loadInventory(opts.Inventory, max, &errs)
	if err != nil {
		return Inventory{}, nil, &PathError{err}
	}
	return inv, errs, nil
}
