package applier

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hnsplan/hnsplan/applier/planwatch"
)

// TakePlan takes u as if the plan source had delivered it.
func (a *Agent) TakePlan(u planwatch.Update) { a.takePlan(u) }

// Defaults is Config.withDefaults, for tests that hold others to them.
func (c Config) Defaults() Config { return c.withDefaults() }

func (a *Agent) TakeControl(data map[string]string) { a.takeControl(data) }

// Registry is the agent's metrics registry (/metrics).
func (a *Agent) Registry() *prometheus.Registry { return a.reg }
