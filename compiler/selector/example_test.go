package selector_test

import (
	"fmt"

	"github.com/hnsplan/hnsplan/compiler/selector"
)

func ExampleParse() {
	sel, err := selector.Parse(`app == 'web' && tier not in {"test", "dev"}`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sel)
	fmt.Println(sel.LabelKeys())
	fmt.Println(sel.Evaluate(map[string]string{"app": "web"}))
	fmt.Println(sel.Evaluate(map[string]string{"app": "web", "tier": "dev"}))

	_, err = selector.Parse(`app == `)
	fmt.Println(err)
	// Output:
	// (app == "web" && tier not in {"dev", "test"})
	// [app tier]
	// true
	// false
	// selector "app == ": expected a quoted string at offset 7
}
