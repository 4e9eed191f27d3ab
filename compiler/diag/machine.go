package diag

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"

	"strings"
)

// SARIFSchema is the JSON schema a SARIF log names, OASIS's for 2.1.0.
const SARIFSchema = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

// Tool names the program that wrote a SARIF log.
type Tool struct {
	Name, Version, InformationURI string
}

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	Version        string      `json:"version,omitempty"`
	InformationURI string      `json:"informationUri,omitempty"`
	Rules          []sarifRule `json:"rules"`
}

type sarifText struct {
	Text string `json:"text"`
}

type sarifRule struct {
	ID                   string          `json:"id"`
	ShortDescription     *sarifText      `json:"shortDescription,omitempty"`
	Help                 *sarifText      `json:"help,omitempty"`
	HelpURI              string          `json:"helpUri,omitempty"`
	DefaultConfiguration *sarifRuleLevel `json:"defaultConfiguration,omitempty"`
}

type sarifRuleLevel struct {
	Level string `json:"level"`
}

type sarifResult struct {
	RuleID           string          `json:"ruleId"`
	RuleIndex        int             `json:"ruleIndex"`
	Level            string          `json:"level"`
	Message          sarifText       `json:"message"`
	Locations        []sarifLocation `json:"locations,omitempty"`
	RelatedLocations []sarifLocation `json:"relatedLocations,omitempty"`
	Properties       *sarifProps     `json:"properties,omitempty"`
}

// sarifProps is a result's property bag: what SARIF has no field for.
type sarifProps struct {
	RelatedOmitted int `json:"relatedOmitted"`
}

type sarifLocation struct {
	// ID numbers a related location within its result (SARIF §3.28.2:
	// unique there, from 0); a result's own location has none.
	ID               *int          `json:"id,omitempty"`
	PhysicalLocation sarifPhysical `json:"physicalLocation"`
	Message          *sarifText    `json:"message,omitempty"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           *sarifRegion  `json:"region,omitempty"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine   int `json:"startLine"`
	StartColumn int `json:"startColumn,omitempty"`
}

// sarifLevel maps a severity to SARIF's result levels.
func sarifLevel(s Severity) string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	}
	return "note"
}

// WriteSARIF writes the findings as a SARIF 2.1.0 log of one run, as
// GitHub code scanning reads it: each rule found once in the driver's
// rules (summary, remedy, reference URL from docs, which may be nil), each
// finding a result at its file (a relative URI, slash-separated, as the
// position has it), line and column, and its related positions as
// relatedLocations (with the count past MaxRelated as the property
// relatedOmitted).
func (l List) WriteSARIF(w io.Writer, tool Tool, docs Docs) error {
	run := sarifRun{Tool: sarifTool{Driver: sarifDriver{Name: tool.Name, Version: tool.Version,
		InformationURI: tool.InformationURI, Rules: []sarifRule{}}}, Results: []sarifResult{}}
	index := map[string]int{}
	for _, f := range l {
		i, ok := index[f.Rule]
		if !ok {
			i = len(run.Tool.Driver.Rules)
			index[f.Rule] = i
			r := sarifRule{ID: f.Rule}
			if docs != nil {
				if d, ok := docs(f.Rule); ok {
					if d.Summary != "" {
						r.ShortDescription = &sarifText{d.Summary}
					}
					if help := helpText(d); help != "" {
						r.Help = &sarifText{help}
					}
					r.HelpURI = d.HelpURI
				}
			}
			run.Tool.Driver.Rules = append(run.Tool.Driver.Rules, r)
		}
		msg := f.Message
		if f.Path != "" {
			msg = f.Path + ": " + msg
		}
		if f.Node != "" {
			msg = "node " + f.Node + ": " + msg
		}
		res := sarifResult{RuleID: f.Rule, RuleIndex: i, Level: sarifLevel(f.Severity), Message: sarifText{msg}}
		if f.Pos.IsValid() {
			res.Locations = []sarifLocation{{PhysicalLocation: sarifPhysicalAt(f.Pos)}}
		}
		for k, r := range f.Related {
			loc := sarifLocation{ID: &k, PhysicalLocation: sarifPhysicalAt(r.Pos)}
			if r.Message != "" {
				loc.Message = &sarifText{r.Message}
			}
			res.RelatedLocations = append(res.RelatedLocations, loc)
		}
		if f.RelatedOmitted > 0 {
			res.Properties = &sarifProps{RelatedOmitted: f.RelatedOmitted}
		}
		run.Results = append(run.Results, res)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(sarifLog{Schema: SARIFSchema, Version: "2.1.0", Runs: []sarifRun{run}})
}

// sarifPhysicalAt is a physical location at p, which is valid.
func sarifPhysicalAt(p Pos) sarifPhysical {
	loc := sarifPhysical{ArtifactLocation: sarifArtifact{URI: fileURI(p.File)}}
	if p.Line > 0 {
		loc.Region = &sarifRegion{StartLine: p.Line, StartColumn: p.Col}
	}
	return loc
}

func helpText(d RuleDoc) string {
	var parts []string
	if d.Remedy != "" {
		parts = append(parts, d.Remedy)
	}
	if len(d.References) > 0 {
		parts = append(parts, "References: "+strings.Join(d.References, "; "))
	}
	return strings.Join(parts, "\n\n")
}

// fileURI writes a path as a URI reference: slash-separated, with the
// characters a URI reserves escaped. A relative path stays relative (to
// the directory the tool ran in, the repository root in CI).
func fileURI(path string) string {
	path = filepath.ToSlash(path)
	abs := strings.HasPrefix(path, "/") || len(path) > 2 && path[1] == ':' && path[2] == '/' // C:/...
	var b strings.Builder
	for i := 0; i < len(path); i++ {
		c := path[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~/", c) >= 0 || c == ':' && abs {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	switch {
	case !abs:
		return b.String()
	case strings.HasPrefix(path, "/"):
		return "file://" + b.String()
	}
	return "file:///" + b.String()
}

// WriteGitHub writes one GitHub Actions workflow command a finding:
// "::error file=F,line=L,col=C,title=hnsplan RULE::message" (warning for
// warnings, notice for infos), so that the runner annotates the intent's
// lines in the pull request. A workflow command has one position: the
// related ones follow the message on lines of their own, as text output
// prints them.
func (l List) WriteGitHub(w io.Writer) error {
	for _, f := range l {
		level := map[Severity]string{Error: "error", Warning: "warning"}[f.Severity]
		if level == "" {
			level = "notice"
		}
		var props []string
		if f.Pos.IsValid() {
			props = append(props, "file="+escapeProperty(filepath.ToSlash(f.Pos.File)))
			if f.Pos.Line > 0 {
				props = append(props, fmt.Sprintf("line=%d", f.Pos.Line))
			}
			if f.Pos.Col > 0 {
				props = append(props, fmt.Sprintf("col=%d", f.Pos.Col))
			}
		}
		props = append(props, "title="+escapeProperty("hnsplan "+f.Rule))
		msg := f.Message
		if f.Path != "" {
			msg = f.Path + ": " + msg
		}
		if f.Node != "" {
			msg = "node " + f.Node + ": " + msg
		}
		for _, r := range f.Related {
			msg += "\n    " + r.String()
		}
		if f.RelatedOmitted > 0 {
			msg += fmt.Sprintf("\n    and %d more", f.RelatedOmitted)
		}
		if _, err := fmt.Fprintf(w, "::%s %s::%s\n", level, strings.Join(props, ","), escapeData(msg)); err != nil {
			return err
		}
	}
	return nil
}

// escapeData escapes a workflow command's message, as the runner
// unescapes it (actions/toolkit, command.ts).
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

// escapeProperty escapes a workflow command's property value.
func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
