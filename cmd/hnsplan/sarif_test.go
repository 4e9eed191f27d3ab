package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestVetSARIF validates `hnsplan vet -o sarif` against the official
// SARIF 2.1.0 JSON schema (testdata/sarif), for a valid intent with infos
// and warnings and an invalid one, and checks that every finding of
// `vet -o json` is a result at the same file, line and column, and that
// -o github annotates the same lines.
func TestVetSARIF(t *testing.T) {
	schemaFile, _ := filepath.Abs("testdata/sarif/sarif-schema-2.1.0.json")
	f, err := os.Open(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(schemaFile, doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}

	// The invalid intent of the three-errors script: errors at three lines.
	ar, err := txtar.ParseFile("../../testdata/script/three-errors.txtar")
	if err != nil {
		t.Fatal(err)
	}
	invalid := t.TempDir()
	for _, f := range ar.Files {
		if strings.HasPrefix(f.Name, "intent/") {
			p := filepath.Join(invalid, f.Name)
			os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, f.Data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		args    []string
		invalid bool
	}{
		{"calico-vxlan", []string{"../../examples/calico-vxlan", "--inventory", "../../examples/inventory/calico-vxlan.yaml"}, false},
		{"three-errors", []string{filepath.Join(invalid, "intent")}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vet := func(format string) string {
				var out, errOut bytes.Buffer
				code := run(append([]string{"vet", "-o", format}, tc.args...), &out, &errOut)
				if want := map[bool]int{false: 0, true: 1}[tc.invalid]; code != want {
					t.Fatalf("vet -o %s: exit %d, want %d\n%s", format, code, want, errOut.String())
				}
				return out.String()
			}
			sarif := vet("sarif")
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(sarif))
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.Validate(inst); err != nil {
				t.Fatalf("vet -o sarif does not validate against the SARIF 2.1.0 schema: %v\n%s", err, sarif)
			}
			// The schema is strict enough to catch a level SARIF lacks.
			bad, _ := jsonschema.UnmarshalJSON(strings.NewReader(strings.Replace(sarif, `"level": "`, `"level": "fatal-`, 1)))
			if schema.Validate(bad) == nil {
				t.Fatal("the schema accepts a result of level fatal-*")
			}

			var findings struct {
				FormatVersion int `json:"formatVersion"`
				Findings      []struct {
					Rule, Severity, File, Pos, HelpURI string
					Line, Column                       int
					Related                            []struct {
						File         string
						Line, Column int
					}
				}
			}
			if err := json.Unmarshal([]byte(vet("json")), &findings); err != nil {
				t.Fatal(err)
			}
			var log struct {
				Runs []struct {
					Tool struct {
						Driver struct {
							Rules []struct{ ID, HelpURI string }
						}
					}
					Results []struct {
						RuleID    string
						RuleIndex int
						Level     string
						Locations []struct {
							PhysicalLocation struct {
								ArtifactLocation struct{ URI string }
								Region           struct{ StartLine, StartColumn int }
							}
						}
						RelatedLocations []struct {
							PhysicalLocation struct {
								ArtifactLocation struct{ URI string }
								Region           struct{ StartLine, StartColumn int }
							}
						}
					}
				}
			}
			if err := json.Unmarshal([]byte(sarif), &log); err != nil {
				t.Fatal(err)
			}
			if findings.FormatVersion != 1 || len(findings.Findings) == 0 || len(log.Runs) != 1 {
				t.Fatalf("formatVersion %d, %d findings, %d runs", findings.FormatVersion, len(findings.Findings), len(log.Runs))
			}
			run := log.Runs[0]
			if len(run.Results) != len(findings.Findings) {
				t.Fatalf("%d SARIF results for %d findings", len(run.Results), len(findings.Findings))
			}
			github := strings.Split(strings.TrimSpace(vet("github")), "\n")
			related := 0
			for i, f := range findings.Findings {
				if r := run.Results[i].RelatedLocations; len(r) != len(f.Related) {
					t.Errorf("%s at %s: %d related positions in JSON, %d relatedLocations in SARIF", f.Rule, f.Pos, len(f.Related), len(r))
				}
				for k, rel := range f.Related {
					related++
					if k >= len(run.Results[i].RelatedLocations) {
						break
					}
					loc := run.Results[i].RelatedLocations[k].PhysicalLocation
					if strings.TrimPrefix(loc.ArtifactLocation.URI, "file://") != filepath.ToSlash(rel.File) || loc.Region.StartLine != rel.Line || loc.Region.StartColumn != rel.Column {
						t.Errorf("%s at %s: related %+v, SARIF %+v", f.Rule, f.Pos, rel, loc)
					}
				}
				r := run.Results[i]
				if r.RuleID != f.Rule || run.Tool.Driver.Rules[r.RuleIndex].ID != f.Rule {
					t.Errorf("result %d is rule %s (index %d), finding is %s", i, r.RuleID, r.RuleIndex, f.Rule)
				}
				if f.HelpURI == "" || run.Tool.Driver.Rules[r.RuleIndex].HelpURI != f.HelpURI {
					t.Errorf("%s: helpUri %q in JSON, %q in SARIF", f.Rule, f.HelpURI, run.Tool.Driver.Rules[r.RuleIndex].HelpURI)
				}
				if f.Pos == "" {
					continue
				}
				loc := r.Locations[0].PhysicalLocation
				if uri := strings.TrimPrefix(loc.ArtifactLocation.URI, "file://"); uri != filepath.ToSlash(f.File) || loc.Region.StartLine != f.Line || loc.Region.StartColumn != f.Column {
					t.Errorf("%s at %s: SARIF location %+v", f.Rule, f.Pos, loc)
				}
				if !strings.Contains(github[i], "file="+filepath.ToSlash(f.File)+",line=") || !strings.HasPrefix(github[i], "::") {
					t.Errorf("-o github line %d %q does not annotate %s", i, github[i], f.Pos)
				}
			}
			// The valid intent's capacity hint relates the pool's block size:
			// the schema saw relatedLocations.
			if !tc.invalid && related == 0 {
				t.Error("no finding with related positions: relatedLocations are not validated")
			}
		})
	}
}
