package winbuild_test

import (
	"strings"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/winbuild"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    string // the regression's ID, "" for none
		wantErr bool
	}{
		{in: "10.0.20348.2582", want: "ws2022-2024-07-container-networking"},
		{in: "20348.2582", want: "ws2022-2024-07-container-networking"},
		{in: "10.0.20348.2655", want: "ws2022-2024-07-container-networking"}, // August 2024
		{in: "10.0.20348.2700", want: "ws2022-2024-07-container-networking"}, // September 2024
		{in: "10.0.20348.2761", want: "ws2022-2024-07-container-networking"},
		{in: "10.0.20348.2582 (WinBuild.160101.0800)", want: "ws2022-2024-07-container-networking"},
		{in: "10.0.20348.2581"},                   // before KB5040437
		{in: "10.0.20348.2527"},                   // June 2024
		{in: "10.0.20348.2762"},                   // KB5044281: fixed
		{in: "10.0.20348.3207"},                   // later
		{in: "10.0.17763.2582"},                   // another build number, same revision
		{in: "10.0.26100.2582"},                   // Windows Server 2025
		{in: "6.2.9200.0", wantErr: true},         // not Windows 10's kernel
		{in: "10.0.20348", wantErr: true},         // no revision
		{in: "10.0.20348.-1", wantErr: true},      // negative
		{in: "10.0.20348.+5", wantErr: true},      // sign
		{in: "10.0.99999999999.1", wantErr: true}, // out of range
		{in: "", wantErr: true},
		{in: "5.15.0-1057-azure", wantErr: true}, // a Linux kernel
	} {
		_, r, ok, err := winbuild.Check(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("Check(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if got := map[bool]string{true: r.ID}[ok]; got != tc.want {
			t.Errorf("Check(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestCatalog holds every entry to the package's rule: an ID, a range
// within one build number that fixes something, a KB and a date for both
// updates, and public sources.
func TestCatalog(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range winbuild.Catalog {
		if r.ID == "" || seen[r.ID] {
			t.Errorf("entry %q: empty or duplicate ID", r.ID)
		}
		seen[r.ID] = true
		if r.Introduced.Build.Number != r.Fixed.Build.Number || r.Fixed.Build.Revision <= r.Introduced.Build.Revision {
			t.Errorf("%s: %v does not fix %v", r.ID, r.Fixed, r.Introduced)
		}
		for _, u := range []winbuild.Update{r.Introduced, r.Fixed} {
			if !strings.HasPrefix(u.KB, "KB") || len(u.Date) != len("2024-07-09") {
				t.Errorf("%s: update %v needs a KB and a YYYY-MM-DD date", r.ID, u)
			}
		}
		if r.Fixed.Date <= r.Introduced.Date {
			t.Errorf("%s: fixed %s before introduced %s", r.ID, r.Fixed.Date, r.Introduced.Date)
		}
		if len(r.Sources) < 2 || r.Summary == "" {
			t.Errorf("%s: needs a summary and two sources (a report and the fix's notice)", r.ID)
		}
		for _, s := range r.Sources {
			if !strings.HasPrefix(s, "https://") {
				t.Errorf("%s: source %q is not a public URL", r.ID, s)
			}
		}
		if !r.Affects(r.Introduced.Build) || r.Affects(r.Fixed.Build) {
			t.Errorf("%s: must affect %v and not %v", r.ID, r.Introduced.Build, r.Fixed.Build)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("10.0.20348.2582")
	f.Add("20348.2582")
	f.Fuzz(func(t *testing.T, s string) {
		b, err := winbuild.Parse(s)
		if err != nil {
			return
		}
		if again, err := winbuild.Parse(b.String()); err != nil || again != b {
			t.Fatalf("Parse(%q) = %v; its String %q reads back as %v, %v", s, b, b.String(), again, err)
		}
	})
}
