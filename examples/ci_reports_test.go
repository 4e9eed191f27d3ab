package examples_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sarifSchema is the official SARIF 2.1.0 JSON schema the CLI's own SARIF
// test validates against (cmd/hnsplan/testdata/sarif).
func sarifSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	file, err := filepath.Abs("../cmd/hnsplan/testdata/sarif/sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(file, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(file)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkSARIF validates the SARIF file the workflow uploads; with an error
// in the intent, one of its results is an error at cluster/cluster.cue.
func checkSARIF(t *testing.T, schema *jsonschema.Schema, file string, wantError bool) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Errorf("the SARIF to upload: %v", err)
		return
	}
	defer f.Close()
	inst, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Errorf("%s: %v", file, err)
		return
	}
	if err := schema.Validate(inst); err != nil {
		t.Errorf("%s is not SARIF 2.1.0: %v", file, err)
	}
	data, _ := json.Marshal(inst)
	var log struct {
		Runs []struct {
			Results []struct {
				Level     string
				Locations []struct {
					PhysicalLocation struct {
						ArtifactLocation struct{ URI string }
					}
				}
			}
		}
	}
	json.Unmarshal(data, &log)
	found := false
	for _, run := range log.Runs {
		for _, r := range run.Results {
			for _, l := range r.Locations {
				if r.Level == "error" && strings.HasSuffix(l.PhysicalLocation.ArtifactLocation.URI, "cluster/cluster.cue") {
					found = true
				}
			}
		}
	}
	if found != wantError {
		t.Errorf("%s: an error result at cluster/cluster.cue: %v, want %v:\n%s", file, found, wantError, data)
	}
}

var fingerprint = regexp.MustCompile(`^[0-9a-f]{64}$`)

// checkCodeQuality reads a GitLab code quality report as GitLab documents
// it (Code Climate's issue format, the fields GitLab requires): a JSON
// array of issues, each with description, check_name, a unique fingerprint,
// a severity GitLab knows, and location.path with lines.begin.
func checkCodeQuality(t *testing.T, file string, wantError bool) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Errorf("the code quality report: %v", err)
		return
	}
	var issues []map[string]any
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&issues); err != nil {
		t.Errorf("%s is not a JSON array of issues: %v\n%s", file, err, data)
		return
	}
	seen := map[string]bool{}
	critical := false
	for i, is := range issues {
		var loc struct {
			Path  string
			Lines struct{ Begin int }
		}
		b, _ := json.Marshal(is["location"])
		json.Unmarshal(b, &loc)
		fp, _ := is["fingerprint"].(string)
		desc, _ := is["description"].(string)
		check, _ := is["check_name"].(string)
		sev, _ := is["severity"].(string)
		switch {
		case desc == "" || check == "":
			t.Errorf("%s issue %d: no description or check_name: %v", file, i, is)
		case !fingerprint.MatchString(fp) || seen[fp]:
			t.Errorf("%s issue %d: fingerprint %q is not a unique hash", file, i, fp)
		case !regexp.MustCompile(`^(info|minor|major|critical|blocker)$`).MatchString(sev):
			t.Errorf("%s issue %d: severity %q is not one GitLab knows", file, i, sev)
		case loc.Path == "" || strings.HasPrefix(loc.Path, "/") || loc.Lines.Begin < 1:
			t.Errorf("%s issue %d: location %+v: want a path relative to the repository and a line", file, i, loc)
		}
		seen[fp] = true
		if sev == "critical" && check == "vxlan-port" && loc.Path == "cluster/cluster.cue" {
			critical = true
		}
	}
	if critical != wantError {
		t.Errorf("%s: a critical vxlan-port issue at cluster/cluster.cue: %v, want %v:\n%s", file, critical, wantError, data)
	}
}
