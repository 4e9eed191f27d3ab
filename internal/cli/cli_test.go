package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// tree is a small command tree as the binaries build theirs.
func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool", SilenceErrors: true, SilenceUsage: true}
	vet := &cobra.Command{Use: "vet DIR", RunE: func(*cobra.Command, []string) error { return nil }}
	vet.Flags().StringArray("inventory", nil, "")
	vet.Flags().String("severity", "", "")
	group := &cobra.Command{Use: "rollout", Args: cobra.NoArgs, RunE: func(*cobra.Command, []string) error { return nil }}
	group.AddCommand(&cobra.Command{Use: "status", RunE: func(*cobra.Command, []string) error { return nil }})
	root.AddCommand(vet, group)
	Prepare(root, map[string]string{"tool vet": "  tool vet dir"})
	return root
}

func TestDidYouMean(t *testing.T) {
	cases := []struct {
		args []string
		want string // the error; "" for none
	}{
		{[]string{"vet", "--inventroy", "x", "d"}, "unknown flag: --inventroy (did you mean --inventory?)"},
		{[]string{"vet", "--severty", "x", "d"}, "unknown flag: --severty (did you mean --severity?)"},
		{[]string{"vet", "--xyzzy", "d"}, "unknown flag: --xyzzy (see 'tool vet --help' for its flags)"},
		{[]string{"vet", "-severity", "x"}, "unknown shorthand flag: 's' in -severity (did you mean --severity?)"},
		{[]string{"vte"}, `unknown command "vte" for "tool" (did you mean vet?)`},
		{[]string{"rollout", "stauts"}, `unknown command "stauts" for "tool rollout" (did you mean status?)`},
		{[]string{"zzzzzz"}, `unknown command "zzzzzz" for "tool" (its commands: completion, help, rollout, vet)`},
		{[]string{"vet", "--inventory", "x", "d"}, ""},
	}
	for _, c := range cases {
		root := tree()
		root.SetArgs(c.args)
		err := Explain(root, root.Execute())
		if got := ""; err != nil {
			got = err.Error()
			if got != c.want {
				t.Errorf("%q: %q, want %q", c.args, got, c.want)
			}
		} else if c.want != "" {
			t.Errorf("%q: no error, want %q", c.args, c.want)
		}
	}
}

func TestPrepareExamples(t *testing.T) {
	root := tree()
	var missing []string
	Walk(root, func(c *cobra.Command) {
		if c.Example == "" {
			missing = append(missing, c.CommandPath())
		}
	})
	// The table's and cobra's own; the others are the test's to fill.
	want := "tool tool rollout tool rollout status"
	if got := strings.Join(missing, " "); got != want {
		t.Errorf("commands without an example: %q, want %q", got, want)
	}
	for _, path := range []string{"help", "completion", "completion bash", "completion zsh", "completion fish", "completion powershell"} {
		c, _, err := root.Find(strings.Fields(path))
		if err != nil || c.CommandPath() != "tool "+path || !strings.Contains(c.Example, "tool ") {
			t.Errorf("%s: %v %q", path, err, c.Example)
		}
	}
}
