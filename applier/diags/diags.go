// Package diags writes the diagnostics bundle of `hnsplan-agent diags`:
// one tar.gz for a bug report, as `calicoctl node diags` writes one. It
// holds the HNS capture, the versions and OS build, the running agent's
// /status, the HNS audit, the plan digests and the state directory's
// records, and where the logs are; never a secret.
//
// What goes in is made by this package or allow-listed (AllowedState):
// nothing is copied from the state directory, the environment or the
// disk by a pattern, so a kubeconfig, a token or a key beside the agent's
// files stays out. As a second line, every member is scanned for what a
// secret looks like (a PEM private key, a kubeconfig's credentials, a
// bearer token) and left out, with a note, if it matches.
package diags

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/hnsplan/hnsplan/applier"
	"github.com/hnsplan/hnsplan/applier/hns"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/internal/atomicfile"
	"github.com/hnsplan/hnsplan/applier/statedir"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// AllowedState are the state directory's files the bundle takes, each a
// record of the agent's own: the replace journal, the rollout slot, the
// network it owns, the echo baseline, the audit's record and an
// operator's pending requests (each names a plan digest).
var AllowedState = []string{statedir.JournalFile, statedir.SlotFile, statedir.NetworkFile, statedir.EchoFile, statedir.SeenFile,
	statedir.ConfirmFile, statedir.RetryFile, statedir.AbortFile}

// MaxStateFile bounds a state file taken; a larger one is noted, not
// taken.
const MaxStateFile = 4 << 20

// Sources are what the bundle is made of.
type Sources struct {
	Node string
	// Version is the agent's version line (buildinfo).
	Version string
	// OSBuild says the host's OS build (Windows: CurrentBuild.UBR).
	OSBuild func() (string, error)
	// HNS is the node's HNS (its capture and the audit's snapshot).
	HNS hns.Client
	// Status is the running agent's /status, nil if none answers (Err
	// says why).
	Status    []byte
	StatusErr error
	// Plan is the node's verified plan, nil if none was given or it was
	// refused (PlanErr).
	Plan     *plan.NodePlan
	PlanFile string
	PlanErr  error
	// StateDir is the agent's state directory ("" none).
	StateDir string
	// Adapters lists the host's adapters (nil: not on this host).
	Adapters func() ([]string, error)
	// Now stamps the members.
	Now time.Time
}

// Member is one file of the bundle.
type Member struct {
	Name string
	Data []byte
}

// Bundle makes the bundle's members. Every part that fails is a note in
// its member, not an error: a bundle is most needed when things fail.
func Bundle(ctx context.Context, s Sources) []Member {
	var ms []Member
	add := func(name string, data []byte) { ms = append(ms, Member{Name: name, Data: data}) }
	note := func(format string, args ...any) []byte { return []byte(fmt.Sprintf(format, args...) + "\n") }

	osBuild := "unknown"
	if s.OSBuild != nil {
		if b, err := s.OSBuild(); err != nil {
			osBuild = "unknown: " + err.Error()
		} else {
			osBuild = b
		}
	}
	features := "unknown"
	if s.HNS != nil {
		if f, err := s.HNS.Features(ctx); err != nil {
			features = "unknown: " + err.Error()
		} else {
			features = fmt.Sprintf("version %s, v2 API %v, RemoteSubnetRoute %v, VxlanPort %v, ACL Ids %v", f.Version, f.V2API, f.RemoteRoute, f.VxlanPort, f.ACLRuleID)
		}
	}
	add("versions.txt", note("node: %s\nagent: %s\ngo: %s %s/%s\nOS build: %s\nHNS: %s\nmade: %s",
		s.Node, s.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, osBuild, features, s.Now.UTC().Format(time.RFC3339)))

	if s.HNS != nil {
		if c, err := hnswin.CaptureOf(ctx, s.HNS); err != nil {
			add("hns-capture.error.txt", note("the HNS capture failed: %v", err))
		} else if b, err := json.MarshalIndent(c, "", "  "); err == nil {
			add("hns-capture.json", append(b, '\n'))
		}
	}

	if s.Status != nil {
		add("status.json", s.Status)
	} else {
		add("status.txt", note("no running agent answered: %v", s.StatusErr))
	}

	if s.HNS != nil {
		r, err := applier.AuditOnce(ctx, s.HNS, s.Node, s.Plan, s.StateDir, s.Adapters)
		if err != nil {
			add("audit.txt", note("the audit failed: %v", err))
		} else {
			var text bytes.Buffer
			r.WriteText(&text)
			if s.Plan == nil {
				text.WriteString("(no plan given: every network reads as foreign; give --plan for the full audit)\n")
			}
			add("audit.txt", text.Bytes())
			if b, err := json.MarshalIndent(r, "", "  "); err == nil {
				add("audit.json", append(b, '\n'))
			}
		}
	}

	add("plans.txt", plans(s))
	ms = append(ms, state(s.StateDir)...)
	add("logs.txt", note("%s", logsNote))
	add("README.txt", note("hnsplan-agent diags of node %s, %s.\n%s", s.Node, s.Now.UTC().Format(time.RFC3339), readme))

	for i := range ms {
		if why := secretIn(ms[i].Data); why != "" {
			ms[i] = Member{Name: ms[i].Name + ".left-out.txt", Data: note("%s was left out: it holds what looks like %s", ms[i].Name, why)}
		}
	}
	return ms
}

const readme = `versions.txt      the agent, Go, the OS build, HNS's version and features
hns-capture.json  every HNS network, endpoint, load balancer and namespace (hnsplan-agent capture)
status.json       the running agent's /status (status.txt if none answered)
audit.txt, .json  the HNS audit (hnsplan-agent audit)
plans.txt         the digests of the plan given, the plan in force, the plan applied
state/            the agent's own records from its state directory (allow-listed)
logs.txt          where the agent's log is
Nothing else is taken: no kubeconfig, token, key or environment variable.`

const logsNote = `The agent keeps no log file of its own. Its log is:
- as the Windows service: the Application Event Log, source hnsplan-agent:
    Get-WinEvent -FilterHashtable @{LogName='Application'; ProviderName='hnsplan-agent'} -MaxEvents 500
- as the DaemonSet's pod: kubectl logs -n hnsplan-system <pod> (add --previous after a restart).
Its Events are on the Node: kubectl get events --field-selector involvedObject.name=<node>`

// plans lists the digests of the plan given and of the plans /status
// names.
func plans(s Sources) []byte {
	var b strings.Builder
	switch {
	case s.Plan != nil:
		fmt.Fprintf(&b, "plan file %s: %s (node %s)\n", s.PlanFile, s.Plan.Digest, s.Plan.Node)
	case s.PlanFile != "":
		fmt.Fprintf(&b, "plan file %s: refused: %v\n", s.PlanFile, s.PlanErr)
	default:
		b.WriteString("plan file: none given (--plan)\n")
	}
	if s.Status != nil {
		var st applier.AgentStatus
		if err := json.Unmarshal(s.Status, &st); err == nil {
			fmt.Fprintf(&b, "in force: %s (from %s)\napplied: %s\nroutes applied: %s\nsigned by: %s\n",
				orNone(st.Plan), orNone(st.Planned), orNone(st.Applied), orNone(st.AppliedRoutes), orNone(st.Signer))
		}
	}
	return []byte(b.String())
}

// state takes the allow-listed records of dir: regular files only (no
// link is followed), each at most MaxStateFile.
func state(dir string) []Member {
	if dir == "" {
		return nil
	}
	var ms []Member
	for _, name := range AllowedState {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, os.ErrNotExist):
			continue
		case err != nil:
			ms = append(ms, Member{"state/" + name + ".error.txt", []byte(err.Error() + "\n")})
			continue
		case !fi.Mode().IsRegular():
			ms = append(ms, Member{"state/" + name + ".error.txt", []byte("not a regular file: left out\n")})
			continue
		case fi.Size() > MaxStateFile:
			ms = append(ms, Member{"state/" + name + ".error.txt", []byte(fmt.Sprintf("%d bytes, over %d: left out\n", fi.Size(), MaxStateFile))})
			continue
		}
		f, err := os.Open(p)
		if err != nil {
			ms = append(ms, Member{"state/" + name + ".error.txt", []byte(err.Error() + "\n")})
			continue
		}
		b, err := io.ReadAll(io.LimitReader(f, MaxStateFile))
		f.Close()
		if err != nil {
			ms = append(ms, Member{"state/" + name + ".error.txt", []byte(err.Error() + "\n")})
			continue
		}
		ms = append(ms, Member{"state/" + name, b})
	}
	return ms
}

// secrets are what a secret looks like: a PEM private key (any kind,
// OpenSSH's too), a kubeconfig's credentials, a bearer token, a JWT (a
// service account token).
var secrets = []struct {
	what string
	re   *regexp.Regexp
}{
	{"a private key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
	{"kubeconfig credentials", regexp.MustCompile(`(?i)(client-key-data|client-certificate-data|\btoken)\s*:\s*\S`)},
	{"a bearer token", regexp.MustCompile(`(?i)bearer\s+[a-z0-9._~+/-]{16,}`)},
	{"a JSON web token", regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.`)},
}

// secretIn says what secret b seems to hold, "" none.
func secretIn(b []byte) string {
	for _, s := range secrets {
		if s.re.Match(b) {
			return s.what
		}
	}
	return ""
}

// Write writes members as a gzipped tar to w, each stamped at now, mode
// 0600, under dir/.
func Write(w io.Writer, dir string, now time.Time, members []Member) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, m := range members {
		hdr := &tar.Header{Name: dir + "/" + m.Name, Mode: 0o600, Size: int64(len(m.Data)), ModTime: now, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(m.Data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// WriteFile writes the bundle to path atomically (a temporary file beside
// it, renamed), its members under dir/, and returns its size.
func WriteFile(path, dir string, now time.Time, members []Member) (int, error) {
	var buf bytes.Buffer
	if err := Write(&buf, dir, now, members); err != nil {
		return 0, err
	}
	if err := atomicfile.Write(path, buf.Bytes()); err != nil {
		return 0, fmt.Errorf("write %s: %w", path, err)
	}
	return buf.Len(), nil
}
