package imagebuild

import (
	"strings"
	"testing"
)

func TestResolveHostProcess(t *testing.T) {
	hostFiles, hostPath := DefaultHost()
	shadowed := append([]string{`C:\hnsplan-agent.exe`, `C:\Windows\System32\hnsplan-agent.exe`}, hostFiles...)
	const id = "c0ffee"
	agent := []string{"hnsplan-agent.exe"}
	tests := []struct {
		name string
		c    HostProcess
		// want is the program started, "" for none (then wantErr is in
		// the error); inImage whether it is the image's.
		want, wantErr string
		inImage       bool
	}{
		{name: "bare name, bind, clean host: cmd finds it on PATH's C:\\hpc",
			c:    HostProcess{Entrypoint: agent, Args: []string{"run"}, Behavior: Bind, ImageFiles: agent},
			want: `C:\hpc\hnsplan-agent.exe`, inImage: true},
		{name: "bare name, bind, a copy in the host's C:\\ (the default working directory) wins",
			c:    HostProcess{Entrypoint: agent, Behavior: Bind, ImageFiles: agent, HostFiles: shadowed},
			want: `C:\hnsplan-agent.exe`},
		{name: "bare name, bind, a copy on the host's PATH wins over the image's, PATH's last entry",
			c:    HostProcess{Entrypoint: agent, Behavior: Bind, ImageFiles: agent, HostFiles: shadowed[1:]},
			want: `C:\Windows\system32\hnsplan-agent.exe`},
		{name: "bare name, bind, working directory the sandbox: the image's first",
			c:    HostProcess{Entrypoint: agent, WorkingDir: SandboxMountPoint, Behavior: Bind, ImageFiles: agent, HostFiles: shadowed},
			want: `C:\hpc\hnsplan-agent.exe`, inImage: true},
		{name: "bare name, fallback: C:\\ is joined under the rootfs, searched first",
			c:    HostProcess{Entrypoint: agent, Behavior: Fallback, ContainerID: id, ImageFiles: agent, HostFiles: shadowed},
			want: `C:\hpc\c0ffee\hnsplan-agent.exe`, inImage: true},
		{name: "sandbox variable, bind, shadowed host",
			c:    HostProcess{Entrypoint: []string{AgentEntrypoint}, Args: []string{"run", "--node=win-1"}, Behavior: Bind, ImageFiles: agent, HostFiles: shadowed},
			want: `C:\hpc\hnsplan-agent.exe`, inImage: true},
		{name: "sandbox variable, fallback",
			c:    HostProcess{Entrypoint: []string{AgentEntrypoint}, Behavior: Fallback, ContainerID: id, ImageFiles: agent, HostFiles: shadowed},
			want: `C:\hpc\c0ffee\hnsplan-agent.exe`, inImage: true},
		{name: "absolute C:\\hpc path, bind: cmd sees the silo's binding",
			c:    HostProcess{Entrypoint: []string{`C:\hpc\hnsplan-agent.exe`}, Behavior: Bind, ImageFiles: agent},
			want: `C:\hpc\hnsplan-agent.exe`, inImage: true},
		{name: "absolute C:\\hpc path, fallback: the image is under C:\\hpc\\<id>",
			c:       HostProcess{Entrypoint: []string{`C:\hpc\hnsplan-agent.exe`}, Behavior: Fallback, ContainerID: id, ImageFiles: agent},
			wantErr: "failed to find executable"},
		{name: "no extension: SearchPath appends .exe (fallback)",
			c:    HostProcess{Entrypoint: []string{"hnsplan-agent"}, Behavior: Fallback, ContainerID: id, ImageFiles: agent},
			want: `C:\hpc\c0ffee\hnsplan-agent.exe`, inImage: true},
		{name: "no extension: cmd tries PATHEXT (bind)",
			c:    HostProcess{Entrypoint: []string{"hnsplan-agent"}, Behavior: Bind, ImageFiles: agent},
			want: `C:\hpc\hnsplan-agent.exe`, inImage: true},
		{name: "relative path, fallback: under the rootfs working directory",
			c:    HostProcess{Entrypoint: []string{`bin\hnsplan-agent.exe`}, Behavior: Fallback, ContainerID: id, ImageFiles: []string{"bin/hnsplan-agent.exe"}},
			want: `C:\hpc\c0ffee\bin\hnsplan-agent.exe`, inImage: true},
		{name: "relative path, bind: relative to the host's C:\\, not found",
			c:       HostProcess{Entrypoint: []string{`bin\hnsplan-agent.exe`}, Behavior: Bind, ImageFiles: []string{"bin/hnsplan-agent.exe"}},
			wantErr: "is not recognized"},
		{name: "the pod's command replaces Entrypoint and drops Cmd",
			c:    HostProcess{Entrypoint: []string{"other.exe"}, Cmd: []string{"x"}, Command: []string{AgentEntrypoint}, Behavior: Fallback, ContainerID: id, ImageFiles: agent},
			want: `C:\hpc\c0ffee\hnsplan-agent.exe`, inImage: true},
		{name: "the pod's args replace Cmd only: Entrypoint stays",
			c:    HostProcess{Entrypoint: []string{AgentEntrypoint}, Cmd: []string{"nothing.exe"}, Args: []string{"run"}, Behavior: Bind, ImageFiles: agent},
			want: `C:\hpc\hnsplan-agent.exe`, inImage: true},
		{name: "Cmd alone is the program",
			c:    HostProcess{Cmd: []string{AgentEntrypoint, "run"}, Behavior: Bind, ImageFiles: agent},
			want: `C:\hpc\hnsplan-agent.exe`, inImage: true},
		{name: "a name with a space is quoted and found whole (fallback)",
			c:    HostProcess{Entrypoint: []string{SandboxMountPoint + `\my agent.exe`}, Behavior: Fallback, ContainerID: id, ImageFiles: []string{"my agent.exe"}},
			want: `C:\hpc\c0ffee\my agent.exe`, inImage: true},
		{name: "not in the image", c: HostProcess{Entrypoint: []string{AgentEntrypoint}, Behavior: Fallback, ImageFiles: []string{"other.exe"}},
			wantErr: "failed to find executable"},
		{name: "no command at all", c: HostProcess{Behavior: Bind, ImageFiles: agent}, wantErr: "no command"},
		{name: "the image sets PATH", c: HostProcess{Entrypoint: agent, Env: []string{`Path=C:\x`}, Behavior: Bind, ImageFiles: agent},
			wantErr: "sets PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			if c.HostFiles == nil {
				c.HostFiles = hostFiles
			}
			c.HostPath = hostPath
			r, err := ResolveHostProcess(c)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %+v, %v; want an error with %q", r, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.EqualFold(r.Exe, tt.want) || r.InImage != tt.inImage {
				t.Errorf("started %s (in image: %v), want %s (in image: %v); command line %q, working directory %s",
					r.Exe, r.InImage, tt.want, tt.inImage, r.CommandLine, r.WorkDir)
			}
			if c.Behavior == Bind && !strings.HasPrefix(r.CommandLine, "cmd /c ") {
				t.Errorf("bind-mode command line %q: hcsshim prefixes cmd /c", r.CommandLine)
			}
		})
	}
}

func TestCheckHostProcess(t *testing.T) {
	cfg := AgentConfig(Meta{})
	ok := HostProcess{Entrypoint: cfg.Entrypoint, Args: []string{"run"}, ImageFiles: []string{AgentExe}}
	if err := CheckHostProcess(ok, AgentExe); err != nil {
		t.Errorf("the agent image's entrypoint: %v", err)
	}
	for _, bad := range []struct {
		c    HostProcess
		want string
	}{
		{HostProcess{Entrypoint: []string{AgentExe}, ImageFiles: []string{AgentExe}}, "starts the host's"},
		{HostProcess{Entrypoint: []string{`C:\hpc\` + AgentExe}, ImageFiles: []string{AgentExe}}, "fallback mounts"},
		{HostProcess{Entrypoint: []string{AgentEntrypoint}, ImageFiles: []string{"bin/" + AgentExe}}, "failed to find"},
		{HostProcess{Entrypoint: []string{SandboxMountPoint + `\cmd.exe`}, ImageFiles: []string{AgentExe, "cmd.exe"}}, "not " + AgentExe},
	} {
		err := CheckHostProcess(bad.c, AgentExe)
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("entrypoint %q: got %v, want an error with %q", bad.c.Entrypoint, err, bad.want)
		}
	}
}

func TestEscapeArgs(t *testing.T) {
	for in, want := range map[string]string{
		"":                `""`,
		`C:\x\y.exe`:      `C:\x\y.exe`,
		`a b`:             `"a b"`,
		`say "hi"`:        `"say \"hi\""`,
		`C:\dir with\ `:   `"C:\dir with\ "`,
		`C:\dir with\`:    `"C:\dir with\\"`,
		`--state-dir=C:\`: `--state-dir=C:\`,
		`a"b`:             `a\"b`,
	} {
		if got := escapeArg(in); got != want {
			t.Errorf("escapeArg(%q) = %s, want %s", in, got, want)
		}
	}
}
