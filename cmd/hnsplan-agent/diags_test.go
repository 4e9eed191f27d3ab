package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/applier/audit"
	"github.com/hnsplan/hnsplan/applier/hns/hnswin"
	"github.com/hnsplan/hnsplan/applier/statedir"
)

// Secrets a node holds beside the agent's files, planted where diags
// looks: in the state directory and in the environment.
const (
	plantedKey   = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n"
	plantedToken = "eyJhbGciOiJSUzI1NiIsImtpZCI6InBsYW50ZWQifQ.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQ6aG5zcGxhbiJ9.c2VjcmV0LXNpZ25hdHVyZQ"
	plantedCert  = "LS0tLS1CRUdJTiBQTEFOVEVEIENMSUVOVCBLRVktLS0tLQ=="
)

// TestDiags: diags writes one tar.gz whose members a test opens and
// checks one by one — the capture decodes as HNS, the audit names the
// orphan, the state records are the agent's — and in which none of a
// kubeconfig, a token and a private key planted in the state directory
// and the environment appears.
func TestDiags(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if out, err := exec.Command("go", "build", "-o", bin+"/", "../hnsplan").CombinedOutput(); err != nil {
		t.Fatalf("building hnsplan: %v\n%s", err, out)
	}
	plans := filepath.Join(dir, "plans")
	if out, err := exec.Command(filepath.Join(bin, "hnsplan"), "compile", "../../examples/calico-vxlan", "--inventory", "../../examples/inventory/calico-vxlan.yaml", "-o", plans).CombinedOutput(); err != nil {
		t.Fatalf("compile: %v\n%s", err, out)
	}
	planFile := filepath.Join(plans, "win-1.json")
	state := filepath.Join(dir, "hns.json")
	var out, errOut bytes.Buffer
	if code := run([]string{"apply", "--once", "--plan", planFile, "--node", "win-1", "--hns", "mem:" + state, "--simulate-cni"}, &out, &errOut); code != 0 {
		t.Fatalf("apply: %d\n%s%s", code, out.String(), errOut.String())
	}
	stateDir := state + ".d"
	// The agent's own records, and what must never leave the node.
	seen := `{"version": 1, "endpoints": {"Calico/gone_Calico": "2026-01-01T00:00:00Z"}}`
	kubeconfig := "apiVersion: v1\nkind: Config\nusers:\n- name: agent\n  user:\n    client-key-data: " + plantedCert + "\n    token: " + plantedToken + "\n"
	for name, data := range map[string]string{statedir.SeenFile: seen, "kubeconfig": kubeconfig, "token": plantedToken, "id_ed25519": plantedKey,
		// A secret under an allowed name is left out by the scan.
		statedir.ConfirmFile: "sha256:ab\n" + plantedKey} {
		if err := os.WriteFile(filepath.Join(stateDir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBECONFIG", filepath.Join(stateDir, "kubeconfig"))
	t.Setenv("HNSPLAN_TOKEN", plantedToken)
	t.Setenv("SSH_PRIVATE_KEY", plantedKey)

	archive := filepath.Join(dir, "diags.tar.gz")
	out.Reset()
	errOut.Reset()
	if code := run([]string{"diags", "-o", archive, "--plan", planFile, "--node", "win-1", "--hns", "mem:" + state, "--addr", "127.0.0.1:1"}, &out, &errOut); code != 0 {
		t.Fatalf("diags: %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.HasPrefix(out.String(), "wrote "+archive+": ") {
		t.Errorf("diags said %q", out.String())
	}
	members := readArchive(t, archive)

	var names []string
	for name := range members {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"README.txt", "audit.json", "audit.txt", "hns-capture.json", "logs.txt", "plans.txt",
		"state/audit-seen.json", "state/echo.json", "state/network.json", "state/replace-confirm.left-out.txt", "status.txt", "versions.txt"}
	if !slices.Equal(names, want) {
		t.Errorf("members %q\nwant    %q", names, want)
	}
	for name, data := range members {
		for _, secret := range []string{"PRIVATE KEY", "b3BlbnNzaC1rZXkt", plantedToken[:40], plantedCert, "client-key-data"} {
			if strings.Contains(string(data), secret) {
				t.Errorf("%s holds a planted secret (%s…)", name, secret[:10])
			}
		}
	}
	// Each member, checked.
	if _, err := hnswin.DecodeCapture(members["hns-capture.json"]); err != nil {
		t.Errorf("hns-capture.json: %v", err)
	}
	var r audit.Report
	if err := json.Unmarshal(members["audit.json"], &r); err != nil || r.Node != "win-1" || r.PodsFrom != "plan" || len(r.Findings) != len(audit.Kinds) {
		t.Errorf("audit.json: %v, %+v", err, r)
	}
	if !strings.Contains(string(members["audit.txt"]), "no problems found") {
		t.Errorf("audit.txt:\n%s", members["audit.txt"])
	}
	for name, must := range map[string]string{
		"versions.txt":                       "agent: hnsplan-agent ",
		"plans.txt":                          "plan file " + planFile + ": sha256:",
		"status.txt":                         "no running agent answered: no agent answers on 127.0.0.1:1",
		"logs.txt":                           "Get-WinEvent",
		"README.txt":                         "Nothing else is taken",
		"state/audit-seen.json":              seen,
		"state/replace-confirm.left-out.txt": "state/replace-confirm was left out: it holds what looks like a private key",
	} {
		if !strings.Contains(string(members[name]), must) {
			t.Errorf("%s lacks %q:\n%s", name, must, members[name])
		}
	}
	var network struct{ Network string }
	if err := json.Unmarshal(members["state/network.json"], &network); err != nil || network.Network != "Calico" {
		t.Errorf("state/network.json: %v %s", err, members["state/network.json"])
	}

	// Usage.
	if code := run([]string{"diags", "--hns", "mem"}, io.Discard, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "diags needs -o FILE") {
		t.Errorf("diags without -o: %d %s", code, errOut.String())
	}
}

// readArchive opens a tar.gz and returns its regular files by name below
// the one top directory every member shares.
func readArchive(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	out := map[string][]byte{}
	top := ""
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		d, name, ok := strings.Cut(h.Name, "/")
		if !ok || (top != "" && d != top) || !strings.HasPrefix(d, "hnsplan-diags-win-1-") {
			t.Errorf("member %q is not under one hnsplan-diags-win-1-… directory", h.Name)
		}
		top = d
		if h.Typeflag != tar.TypeReg || h.Mode != 0o600 || strings.Contains(name, "..") {
			t.Errorf("member %s: type %c mode %o", h.Name, h.Typeflag, h.Mode)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}
