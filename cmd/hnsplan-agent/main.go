// Command hnsplan-agent runs on each Windows node and converges the node's
// HNS to its plan. `apply --once` applies a plan file once; the service
// (`run`) comes with the reconciler.
//
// Exit codes: 0 success, 1 failure (an HNS error, a plan that does not
// verify), 3 usage error.
package main

import "os"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
