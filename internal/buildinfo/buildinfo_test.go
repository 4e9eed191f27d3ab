package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tt := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            Info
	}{
		{"make build stamps both", "v1.2.0-3-g1a2b3c4-dirty", "1a2b3c4d",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("ffff", "true")},
			Info{Version: "v1.2.0-3-g1a2b3c4-dirty", Commit: "1a2b3c4d"}},
		{"go build in a clone: the revision", "", "",
			&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("1a2b3c4d", "true")},
			Info{Version: "(devel)", Commit: "1a2b3c4d", Modified: true}},
		{"go install at a version: no VCS", "", "",
			&debug.BuildInfo{Main: debug.Module{Version: "v1.2.0"}},
			Info{Version: "v1.2.0", Commit: "unknown"}},
		{"no build information", "", "", nil, Info{Version: "(devel)", Commit: "unknown"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := get(tt.version, tt.commit, tt.bi); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
	line := Info{Version: "v1.2.0", Commit: "1a2b", Modified: true}.Line("hnsplan")
	if !strings.HasPrefix(line, "hnsplan v1.2.0 (commit 1a2b, modified, go1.") {
		t.Errorf("Line: %s", line)
	}
}
