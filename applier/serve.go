package applier

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Handler serves the agent's /healthz, /readyz, /metrics and /status.
// /readyz is ready once a plan has been applied and, with a cluster, the
// caches are synced.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		s := a.Status()
		switch {
		case a.cfg.Kube != nil && !a.cfg.Kube.Synced():
			http.Error(w, "cluster caches not synced", http.StatusServiceUnavailable)
		case s.Applied == "":
			http.Error(w, "no plan applied yet: "+string(s.State)+" "+s.Error, http.StatusServiceUnavailable)
		default:
			io.WriteString(w, "ok\n")
		}
	})
	mux.Handle("/metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(a.Status())
	})
	return mux
}

// serve starts the HTTP endpoints on Config.Listen.
func (a *Agent) serve() (*http.Server, error) {
	ln, err := net.Listen("tcp", a.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", a.cfg.Listen, err)
	}
	srv := &http.Server{Addr: ln.Addr().String(), Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, nil
}
