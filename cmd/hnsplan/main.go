// Command hnsplan validates and compiles the network intent of Kubernetes
// Windows nodes into per-node HNS plans.
//
// Exit codes: 0 success, 1 invalid input or failure, 2 changes found (diff
// --detailed-exitcode), 3 usage error, 4 a rollout is halted (rollout
// status), 5 rollout status --wait timed out.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
