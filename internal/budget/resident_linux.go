package budget

import (
	"bytes"
	"os"
	"strconv"
)

// pageSize is the unit of /proc/self/statm.
var pageSize = int64(os.Getpagesize())

// residentBytes is the process's resident set, from /proc/self/statm
// (its second field, in pages): what the Go runtime holds, the binary's
// pages and anything else mapped and touched.
func residentBytes() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, false
	}
	pages, err := strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil || pages < 0 {
		return 0, false
	}
	return pages * pageSize, true
}
