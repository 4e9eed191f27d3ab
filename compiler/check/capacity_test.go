package check_test

import (
	"encoding/json"
	"net/netip"
	"os"
	"testing"

	"github.com/hnsplan/hnsplan/compiler/check"
)

// TestWindowsCapacityVectors checks the capacity arithmetic against the
// Calico IPAM facts in testdata/oracles/calico/ipam-windows.json.
func TestWindowsCapacityVectors(t *testing.T) {
	data, err := os.ReadFile("../../testdata/oracles/calico/ipam-windows.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Items []struct {
			ID       string          `json:"id"`
			Value    json.RawMessage `json:"value"`
			Example  json.RawMessage `json:"example"`
			Input    json.RawMessage `json:"input"`
			Expected json.RawMessage `json:"expected"`
		} `json:"items"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, it := range file.Items {
		switch it.ID {
		case "ipam-win-01": // 3 reserved at the start of a block, 1 at the end
			var v struct{ StartOfBlock, EndOfBlock int }
			mustJSON(t, it.Value, &v)
			if v.StartOfBlock+v.EndOfBlock != check.WindowsReserved {
				t.Errorf("%s: %d+%d reserved, hnsplan reserves %d", it.ID, v.StartOfBlock, v.EndOfBlock, check.WindowsReserved)
			}
		case "ipam-win-02": // a /26 block: 60 assignable
			var ex struct {
				Block      string
				Assignable int64
			}
			mustJSON(t, it.Example, &ex)
			b := netip.MustParsePrefix(ex.Block)
			if got := check.UsableAddrs(b.Addr().BitLen(), b.Bits()); got != ex.Assignable {
				t.Errorf("%s: UsableAddrs(%s) = %d, want %d", it.ID, b, got, ex.Assignable)
			}
		case "ipam-win-03": // a /24 pool of /26 blocks on Windows: 240
			var in struct {
				Pool      string
				BlockSize int
			}
			var want struct{ Assigned4 int64 }
			mustJSON(t, it.Input, &in)
			mustJSON(t, it.Expected, &want)
			p := netip.MustParsePrefix(in.Pool)
			blocks := int64(1) << (in.BlockSize - p.Bits())
			if got := blocks * check.UsableAddrs(32, in.BlockSize); got != want.Assigned4 {
				t.Errorf("%s: %d addresses, want %d", it.ID, got, want.Assigned4)
			}
		case "ipam-win-12": // the longest usable block is /29 (/125)
			if check.UsableAddrs(32, 29) <= 0 || check.UsableAddrs(32, 30) != 0 || check.UsableAddrs(128, 125) <= 0 || check.UsableAddrs(128, 126) != 0 {
				t.Errorf("%s: /29 and /125 must be the longest usable blocks", it.ID)
			}
		default:
			continue
		}
		ran++
	}
	if ran != 4 {
		t.Fatalf("ran %d of the 4 capacity vectors", ran)
	}
}

func mustJSON(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatal(err)
	}
}

// TestUsableAddrsOutOfRange: a blockSize longer than the address (the
// loader reports it, and the rules still run) has no address; it used to
// shift by a negative amount and panic.
func TestUsableAddrsOutOfRange(t *testing.T) {
	for _, c := range []struct{ bits, size int }{{32, 33}, {32, 128}, {128, 129}, {32, 1 << 20}} {
		if got := check.UsableAddrs(c.bits, c.size); got != 0 {
			t.Errorf("UsableAddrs(%d, %d) = %d, want 0", c.bits, c.size, got)
		}
	}
}
