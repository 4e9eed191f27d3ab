package applier

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hnsplan/hnsplan/compiler/winbuild"
)

// OSBuild is the node's Windows build as the agent reports it (/status
// osBuild): where it read it, and the known regression of that build
// (compiler/winbuild's catalog), if any.
type OSBuild struct {
	// Build is 10.0.<build>.<UBR>; Number and UBR its parts.
	Build  string `json:"build"`
	Number int    `json:"number"`
	UBR    int    `json:"ubr"`
	// From is "registry" (HKLM\SOFTWARE\Microsoft\Windows NT\CurrentVersion
	// CurrentBuild and UBR) or "node" (the Node's
	// status.nodeInfo.kernelVersion).
	From string `json:"from"`
	// Regression is the catalog's entry for the build; nil for none.
	Regression *BuildRegression `json:"regression,omitempty"`
}

// BuildRegression is a known regression as /status names it.
type BuildRegression struct {
	ID         string   `json:"id"`
	Summary    string   `json:"summary"`
	Introduced string   `json:"introducedBy"` // KB5040437 (20348.2582, 2024-07-09)
	Fixed      string   `json:"fixedBy"`      // KB5044281 (20348.2762, 2024-10-08)
	Sources    []string `json:"sources"`
}

// Build sources of OSBuild.From.
const (
	buildFromRegistry = "registry"
	buildFromNode     = "node"
)

// buildWatch finds and reports the node's OS build: the registry's (read
// until it succeeds once: it changes only with a reboot, which restarts
// the agent), else the Node's kernelVersion, which the kubelet updates.
type buildWatch struct {
	registry func() (string, error)
	node     func() (string, bool)
	info     *prometheus.GaugeVec
	event    func(eventtype, reason, message string)

	mu      sync.Mutex
	fromReg string // the registry's build, once read
	regErr  bool   // the registry failed once (not said again)
	said    string // the build last announced (metric, Event)
	current *OSBuild
}

func newBuildWatch(reg prometheus.Registerer) *buildWatch {
	w := &buildWatch{
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hnsplan_windows_build_info",
			Help: "1 for the node's Windows build (10.0.<build>.<UBR>) and the known container-networking regression of that build (compiler/winbuild's ID; \"none\").",
		}, []string{"build", "regression"}),
		event: func(string, string, string) {},
	}
	reg.MustRegister(w.info)
	return w
}

// observe reads the build now, updates the metric and says a new build
// once (an Event: WindowsBuildRegression, a Warning, for a build with a
// known regression; WindowsBuild otherwise). It returns nil when no
// build is known.
func (w *buildWatch) observe() *OSBuild {
	w.mu.Lock()
	defer w.mu.Unlock()
	raw, from := "", ""
	if w.fromReg == "" && w.registry != nil && !w.regErr {
		if s, err := w.registry(); err == nil {
			w.fromReg = s
		} else {
			w.regErr = true
		}
	}
	switch {
	case w.fromReg != "":
		raw, from = w.fromReg, buildFromRegistry
	case w.node != nil:
		if s, ok := w.node(); ok && s != "" {
			raw, from = s, buildFromNode
		}
	}
	if raw == "" {
		return w.current
	}
	b, r, bad, err := winbuild.Check(raw)
	if err != nil {
		return w.current // a Linux kernel, or nothing Windows writes
	}
	o := &OSBuild{Build: b.String(), Number: b.Number, UBR: b.Revision, From: from}
	if bad {
		o.Regression = &BuildRegression{ID: r.ID, Summary: r.Summary, Introduced: r.Introduced.String(), Fixed: r.Fixed.String(), Sources: r.Sources}
	}
	w.current = o
	if o.Build != w.said {
		w.said = o.Build
		w.info.Reset()
		label := "none"
		if bad {
			label = r.ID
			w.event("Warning", "WindowsBuildRegression", fmt.Sprintf("this node runs Windows build %s (from the %s), which has a known container-networking regression since %s: %s; install %s or later",
				o.Build, from, r.Introduced, r.Summary, r.Fixed))
		} else {
			w.event("Normal", "WindowsBuild", fmt.Sprintf("this node runs Windows build %s (from the %s); compiler/winbuild knows no container-networking regression of it", o.Build, from))
		}
		w.info.WithLabelValues(o.Build, label).Set(1)
	}
	return o
}

// regressed is the build's known regression, for the rollout hold: the
// build and its entry, or false for a build with none or none known
// (which proceeds).
func (w *buildWatch) regressed() (winbuild.Build, winbuild.Regression, bool) {
	o := w.observe()
	if o == nil || o.Regression == nil {
		return winbuild.Build{}, winbuild.Regression{}, false
	}
	b, r, bad, err := winbuild.Check(o.Build)
	return b, r, bad && err == nil
}
