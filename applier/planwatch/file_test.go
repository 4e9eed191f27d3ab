package planwatch_test

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

// fileSource returns a File source for node win-1 on a plan path in a new
// directory, with a short debounce and no resync unless the test sets one.
func fileSource(t *testing.T) *planwatch.File {
	return &planwatch.File{
		Path:     filepath.Join(t.TempDir(), "win-1.json"),
		Node:     "win-1",
		Debounce: 50 * time.Millisecond,
		Resync:   -1,
	}
}

// publish replaces path atomically, as a file sync or hnsplan compile
// should: write a temporary file next to it, then rename.
func publish(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestFileAtomicRename(t *testing.T) {
	f := fileSource(t)
	a, da := encode(t, "win-1", 1)
	b, db := encode(t, "win-1", 2)
	publish(t, f.Path, a)
	ch := start(t, f)
	u := expect(t, ch, want{digest: da, raw: a})
	if u.Source != f.Path {
		t.Errorf("Source = %q, want %q", u.Source, f.Path)
	}
	publish(t, f.Path, b)
	expect(t, ch, want{digest: db, raw: b})
	publish(t, f.Path, a)
	expect(t, ch, want{digest: da, raw: a})
}

func TestFileBurstDeliversLastOnce(t *testing.T) {
	f := fileSource(t)
	// The debounce must outlast the burst; the renames take microseconds,
	// a second leaves room for a slow machine.
	f.Debounce = time.Second
	first, d0 := encode(t, "win-1", 0)
	publish(t, f.Path, first)
	ch := start(t, f)
	expect(t, ch, want{digest: d0})

	// Encoded first, so that the renames follow each other closely.
	plans := make([][]byte, 10)
	var digest string // the last plan's
	for i := range plans {
		plans[i], digest = encode(t, "win-1", 10+i)
	}
	for _, p := range plans {
		publish(t, f.Path, p)
	}
	expect(t, ch, want{digest: digest, raw: plans[len(plans)-1]})
	expectQuiet(t, ch, 3*f.Debounce)
}

func TestFileRejects(t *testing.T) {
	good, digest := encode(t, "win-1", 1)
	foreign, _ := encode(t, "win-2", 1)
	defaultRoute := encodeRoutes(t, "win-1", 1, []plan.RemoteSubnetRoute{{DestinationPrefix: netip.MustParsePrefix("0.0.0.0/0"), IsolationId: 4096, ProviderAddress: netip.MustParseAddr("10.0.0.9"), Node: "evil"}}, nil)
	// The parts a case's plan names, published before it.
	parts := map[string][]plan.EncodedPart{"default route": defaultRoute.parts}
	tests := []struct {
		name string
		data []byte
		err  error  // errors.Is the rejection
		msg  string // after "planwatch: <path>: "
	}{
		{"truncated", good[:len(good)/2], nil, "not valid JSON (truncated?)"},
		{"empty", nil, nil, "not valid JSON (truncated?)"},
		{"foreign node", foreign, plan.ErrForeignNode, `plan for node "win-2", this is "win-1": publish the plan compiled for "win-1" here`},
		{"edited", bytes.Replace(good, []byte("192.168.1.0/26"), []byte("192.168.9.0/26"), 1), plan.ErrDigest, "digest does not match the content"},
		{"major 1", bytes.Replace(good, []byte(`"formatVersion": "2.0"`), []byte(`"formatVersion": "1.0"`), 1), plan.ErrMajorVersion,
			`unsupported formatVersion "1.0": this version reads 2.x; format 1 (every route and the whole policy program inside each plan) is written by hnsplan releases before the split into parts: compile and publish it with hnsplan `},
		{"major 3", bytes.Replace(good, []byte(`"formatVersion": "2.0"`), []byte(`"formatVersion": "3.0"`), 1), plan.ErrMajorVersion,
			`unsupported formatVersion "3.0": this version reads 2.x: this agent (hnsplan `},
		{"not a plan", []byte(`{"kind": "ConfigMap"}`), plan.ErrNotANodePlan, "not a NodePlan"},
		// Verified, but hostile: validated before it is delivered.
		{"transparent", invalid(t, "win-1", func(p *plan.NodePlan) { p.Network.Type = "Transparent" }), plan.ErrInvalid,
			`the plan's content is invalid: network.Type: "Transparent" is not a network type the agent programs (Overlay or L2Bridge): hnsplan compile never writes such a plan`},
		// The default route is in a route shard: checked once assembled.
		{"default route", defaultRoute.data, plan.ErrInvalid, "the plan's content is invalid: routeTable " + defaultRoute.table.Name + ".nodes[evil].blocks[0]: 0.0.0.0/0 is a default route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := fileSource(t)
			publish(t, f.Path, good)
			ch := start(t, f)
			expect(t, ch, want{digest: digest})

			for _, p := range parts[tt.name] {
				publish(t, filepath.Join(filepath.Dir(f.Path), plan.PartFileName(p.Name)), p.Data)
			}
			publish(t, f.Path, tt.data)
			u := expect(t, ch, want{err: tt.err, msg: "planwatch: " + f.Path + ": " + tt.msg})
			if !bytes.Equal(u.Raw, tt.data) {
				t.Errorf("Raw = %.40q..., want what was read", u.Raw)
			}
			// The same good plan again must be delivered: the caller has
			// heard of the rejection since.
			publish(t, f.Path, good)
			expect(t, ch, want{digest: digest})
		})
	}
}

func TestFileRemoved(t *testing.T) {
	f := fileSource(t)
	a, da := encode(t, "win-1", 1)
	publish(t, f.Path, a)
	ch := start(t, f)
	expect(t, ch, want{digest: da})

	if err := os.Remove(f.Path); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, want{err: planwatch.ErrAbsent, msg: "the file was removed; the last good plan stays in force"})
	// Created again with the same plan: delivered, the absence came between.
	publish(t, f.Path, a)
	expect(t, ch, want{digest: da})
}

func TestFileAbsentAtStart(t *testing.T) {
	f := fileSource(t)
	ch := start(t, f)
	expect(t, ch, want{err: planwatch.ErrAbsent, msg: "planwatch: " + f.Path + ": no plan published: the file does not exist; waiting for it"})
	a, da := encode(t, "win-1", 1)
	publish(t, f.Path, a)
	expect(t, ch, want{digest: da})
}

func TestFileWriteInPlace(t *testing.T) {
	// An editor, or a copy that is not a rename: the file is truncated and
	// written. A read may catch it half-written, which is a rejection;
	// the complete content must then be delivered.
	f := fileSource(t)
	a, da := encode(t, "win-1", 1)
	b, db := encode(t, "win-1", 2)
	if err := os.WriteFile(f.Path, a, 0o644); err != nil {
		t.Fatal(err)
	}
	ch := start(t, f)
	expect(t, ch, want{digest: da})

	w, err := os.OpenFile(f.Path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write(b[:len(b)/2]); err != nil {
		t.Fatal(err)
	}
	expectSkipping(t, ch, want{msg: "not valid JSON (truncated?)", raw: b[:len(b)/2]}, true)
	if _, err := w.Write(b[len(b)/2:]); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, want{digest: db, raw: b})
}

func TestFileDedupe(t *testing.T) {
	// A resync, a rewrite of the same bytes, a touch and an unrelated file
	// in the directory: none changes the plan, none is delivered.
	f := fileSource(t)
	f.Resync = 10 * time.Millisecond
	a, da := encode(t, "win-1", 1)
	publish(t, f.Path, a)
	ch := start(t, f)
	expect(t, ch, want{digest: da})

	publish(t, f.Path, a)
	now := time.Now()
	if err := os.Chtimes(f.Path, now, now); err != nil {
		t.Fatal(err)
	}
	other, _ := encode(t, "win-2", 1)
	publish(t, filepath.Join(filepath.Dir(f.Path), "win-2.json"), other)
	expectQuiet(t, ch, 20*f.Debounce)

	// And the same rejection is not repeated by the resyncs either.
	publish(t, f.Path, a[:10])
	expect(t, ch, want{msg: "not valid JSON"})
	expectQuiet(t, ch, 20*f.Debounce)
}

func TestFileResyncWithoutEvents(t *testing.T) {
	// A missed event cannot be arranged portably; a debounce of an hour
	// stands in for it: no event leads to a read within the test, so only
	// the resync can deliver.
	f := fileSource(t)
	f.Debounce = time.Hour
	f.Resync = 20 * time.Millisecond
	ch := start(t, f)
	expect(t, ch, want{err: planwatch.ErrAbsent})
	a, da := encode(t, "win-1", 1)
	publish(t, f.Path, a)
	expect(t, ch, want{digest: da})
}

func TestFileNoDirectory(t *testing.T) {
	f := fileSource(t)
	f.Path = filepath.Join(t.TempDir(), "missing", "win-1.json")
	err := f.Run(t.Context(), make(chan planwatch.Update))
	if err == nil || !strings.Contains(err.Error(), "planwatch: "+f.Path+": watch directory "+filepath.Dir(f.Path)) {
		t.Fatalf("Run = %v, want an error naming the plan and its directory", err)
	}
}

func TestFileUnreadable(t *testing.T) {
	// A directory where the plan should be: it exists but cannot be read
	// as a plan (as root, a mode 000 file could still be read).
	f := fileSource(t)
	if err := os.Mkdir(f.Path, 0o755); err != nil {
		t.Fatal(err)
	}
	ch := start(t, f)
	u := expect(t, ch, want{msg: "planwatch: " + f.Path + ": cannot read the file: "})
	if errors.Is(u.Err, planwatch.ErrAbsent) {
		t.Errorf("Err %v: an unreadable file is not an absent one", u.Err)
	}
	if err := os.Remove(f.Path); err != nil {
		t.Fatal(err)
	}
	a, da := encode(t, "win-1", 1)
	publish(t, f.Path, a)
	expectSkipping(t, ch, want{digest: da}, true) // "was removed" may come first
}

// TestFileRead: one read of the file, as Run does on a change (apply
// --once's): the plan, a rejection, or absence.
func TestFileRead(t *testing.T) {
	f := fileSource(t)
	ctx := context.Background()
	if u := f.Read(ctx); u.Plan != nil || !errors.Is(u.Err, planwatch.ErrAbsent) {
		t.Errorf("absent file: %+v, want ErrAbsent", u)
	}
	good, digest := encode(t, "win-1", 1)
	publish(t, f.Path, good)
	if u := f.Read(ctx); u.Err != nil || u.Plan == nil || u.Plan.Digest != digest {
		t.Errorf("good plan: %+v, want digest %s", u, digest)
	}
	foreign, _ := encode(t, "win-2", 1)
	publish(t, f.Path, foreign)
	if u := f.Read(ctx); u.Plan != nil || !errors.Is(u.Err, plan.ErrForeignNode) {
		t.Errorf("foreign plan: %+v, want ErrForeignNode", u)
	}
}
