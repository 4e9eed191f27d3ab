//go:build windows

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/windows"
	"golang.org/x/sys/windows/svc"
	"golang.org/x/sys/windows/svc/eventlog"
	"golang.org/x/sys/windows/svc/mgr"

	"github.com/hnsplan/hnsplan/internal/crash"
)

// stopWaitHint is how long the service tells the service control manager
// a stop may take: run's context is cancelled and it must return by then.
const stopWaitHint = 30 * time.Second

// Event IDs the agent's Event Log entries carry.
const (
	eventStart   = 1
	eventStop    = 2
	eventLog     = 3 // a line of the agent's own log
	eventFailure = 100
)

// runAsService runs run under the Windows service control manager when
// the process was started by it, and reports handled=false otherwise (a
// console, a test), leaving the caller to run in the foreground. Stop and
// Shutdown requests cancel run's context; run must then return. The
// service's lifecycle and the standard logger's output (log and the
// default slog handler) go to the Application Event Log under source name
// (installService registers it). A run that fails exits the service with
// a service-specific code 1, which the recovery actions installService
// sets up answer with a restart.
func runAsService(name string, run func(ctx context.Context) error) (handled bool, err error) {
	isService, err := svc.IsWindowsService()
	if err != nil {
		return false, fmt.Errorf("cannot tell whether a service control manager started hnsplan-agent: %w", err)
	}
	if !isService {
		return false, nil
	}
	elog, err := eventlog.Open(name)
	if err != nil {
		// Without the source the service still runs; its log is lost.
		elog = nil
	}
	h := &serviceHandler{name: name, run: run, elog: elog}
	if elog != nil {
		defer elog.Close()
		prevOut, prevFlags := log.Writer(), log.Flags()
		log.SetOutput(&eventLogWriter{elog: elog})
		log.SetFlags(0) // the Event Log stamps each entry
		defer func() { log.SetOutput(prevOut); log.SetFlags(prevFlags) }()
	}
	if err := svc.Run(name, h); err != nil {
		return true, fmt.Errorf("run as service %s: %w", name, err)
	}
	return true, h.err
}

type serviceHandler struct {
	name string
	run  func(ctx context.Context) error
	elog *eventlog.Log
	err  error // run's error, once Execute has returned
}

func (h *serviceHandler) info(id uint32, msg string) {
	if h.elog != nil {
		_ = h.elog.Info(id, msg)
	}
}

func (h *serviceHandler) logError(id uint32, msg string) {
	if h.elog != nil {
		_ = h.elog.Error(id, msg)
	}
}

// Execute implements svc.Handler.
func (h *serviceHandler) Execute(_ []string, requests <-chan svc.ChangeRequest, status chan<- svc.Status) (svcSpecificEC bool, exitCode uint32) {
	const accepts = svc.AcceptStop | svc.AcceptShutdown
	status <- svc.Status{State: svc.StartPending}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { defer crash.Goroutine(h.name); done <- h.run(ctx) }()
	status <- svc.Status{State: svc.Running, Accepts: accepts}
	h.info(eventStart, h.name+" started")

	stopping := false
	var checkpoint uint32
	tick := time.NewTicker(stopWaitHint / 3)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if stopping && errors.Is(err, context.Canceled) {
				err = nil
			}
			h.err = err
			if err != nil {
				h.logError(eventFailure, fmt.Sprintf("%s failed: %v", h.name, err))
				return true, 1
			}
			h.info(eventStop, h.name+" stopped")
			return false, 0
		case r := <-requests:
			switch r.Cmd {
			case svc.Interrogate:
				status <- r.CurrentStatus
			case svc.Stop, svc.Shutdown:
				if !stopping {
					stopping = true
					h.info(eventStop, fmt.Sprintf("%s stopping (%s)", h.name, cmdName(r.Cmd)))
					cancel()
				}
				checkpoint++
				status <- svc.Status{State: svc.StopPending, CheckPoint: checkpoint, WaitHint: uint32(stopWaitHint / time.Millisecond)}
			}
		case <-tick.C:
			if stopping { // still draining: tell the SCM we are alive
				checkpoint++
				status <- svc.Status{State: svc.StopPending, CheckPoint: checkpoint, WaitHint: uint32(stopWaitHint / time.Millisecond)}
			}
		}
	}
}

func cmdName(c svc.Cmd) string {
	if c == svc.Shutdown {
		return "system shutdown"
	}
	return "stop requested"
}

// eventLogWriter turns each line of the standard logger into an Event Log
// entry: an error if it says level=ERROR (slog's text form) or starts with
// "error", a warning for level=WARN, else information.
type eventLogWriter struct {
	mu   sync.Mutex
	elog *eventlog.Log
}

func (w *eventLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, line := range bytes.Split(bytes.TrimRight(p, "\r\n"), []byte("\n")) {
		msg := string(line)
		if strings.TrimSpace(msg) == "" {
			continue
		}
		var err error
		switch lower := strings.ToLower(msg); {
		case strings.Contains(msg, "level=ERROR") || strings.HasPrefix(lower, "error"):
			err = w.elog.Error(eventLog, msg)
		case strings.Contains(msg, "level=WARN") || strings.HasPrefix(lower, "warning"):
			err = w.elog.Warning(eventLog, msg)
		default:
			err = w.elog.Info(eventLog, msg)
		}
		if err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// installService registers exe (made absolute) with args as the automatic
// service name: it restarts after a failure (5 s, 10 s, then every 30 s;
// the count resets after a day without failure, and a non-zero exit counts
// as a failure), and its Event Log source is registered.
func installService(name, exe string, args []string) error {
	exe, err := filepath.Abs(exe)
	if err != nil {
		return err
	}
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service control manager (run as Administrator): %w", err)
	}
	defer m.Disconnect()
	if s, err := m.OpenService(name); err == nil {
		s.Close()
		return fmt.Errorf("service %s is installed already; run `hnsplan-agent uninstall` first", name)
	}
	s, err := m.CreateService(name, exe, mgr.Config{
		DisplayName:      "hnsplan agent",
		Description:      "Applies the HNS plan that hnsplan compiled for this Windows node (github.com/hnsplan/hnsplan).",
		StartType:        mgr.StartAutomatic,
		DelayedAutoStart: true, // after the network and HNS are up
		ErrorControl:     mgr.ErrorNormal,
	}, args...)
	if err != nil {
		return fmt.Errorf("create service %s: %w", name, err)
	}
	defer s.Close()
	undo := func(err error) error {
		_ = s.Delete()
		return err
	}
	actions := []mgr.RecoveryAction{
		{Type: mgr.ServiceRestart, Delay: 5 * time.Second},
		{Type: mgr.ServiceRestart, Delay: 10 * time.Second},
		{Type: mgr.ServiceRestart, Delay: 30 * time.Second},
	}
	if err := s.SetRecoveryActions(actions, uint32((24 * time.Hour).Seconds())); err != nil {
		return undo(fmt.Errorf("service %s: set recovery actions: %w", name, err))
	}
	if err := s.SetRecoveryActionsOnNonCrashFailures(true); err != nil {
		return undo(fmt.Errorf("service %s: set recovery on failure exits: %w", name, err))
	}
	err = eventlog.InstallAsEventCreate(name, eventlog.Error|eventlog.Warning|eventlog.Info)
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return undo(fmt.Errorf("service %s: register the Event Log source: %w", name, err))
	}
	return nil
}

// uninstallService stops the service name if it runs (waiting up to a
// minute), deletes it and removes its Event Log source.
func uninstallService(name string) error {
	m, err := mgr.Connect()
	if err != nil {
		return fmt.Errorf("connect to the service control manager (run as Administrator): %w", err)
	}
	defer m.Disconnect()
	s, err := m.OpenService(name)
	if err != nil {
		if errors.Is(err, windows.ERROR_SERVICE_DOES_NOT_EXIST) {
			return fmt.Errorf("service %s is not installed", name)
		}
		return fmt.Errorf("open service %s: %w", name, err)
	}
	defer s.Close()
	if st, err := s.Query(); err == nil && st.State != svc.Stopped {
		if _, err := s.Control(svc.Stop); err != nil && !errors.Is(err, windows.ERROR_SERVICE_NOT_ACTIVE) {
			return fmt.Errorf("stop service %s: %w", name, err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			st, err := s.Query()
			if err != nil {
				return fmt.Errorf("query service %s: %w", name, err)
			}
			if st.State == svc.Stopped {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("service %s did not stop within a minute; stop it (Stop-Service %s) and try again", name, name)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	if err := s.Delete(); err != nil {
		return fmt.Errorf("delete service %s: %w", name, err)
	}
	if err := eventlog.Remove(name); err != nil && !errors.Is(err, windows.ERROR_FILE_NOT_FOUND) {
		return fmt.Errorf("service %s deleted; removing its Event Log source failed: %w", name, err)
	}
	return nil
}
