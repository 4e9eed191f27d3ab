package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Encode returns the file form of p: indented JSON with a trailing newline,
// its digest set. The digest is sha256 over exactly these bytes with the
// digest's value empty (`"digest": ""`), so it covers every field, known to
// this version or not, and any change to the file breaks it. p.Digest is
// set as a side effect.
func Encode(p *NodePlan) ([]byte, error) {
	p.Digest = ""
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "0E-2A-<ip hex>", not "\u003cip hex\u003e"
	if err := enc.Encode(p); err != nil {
		return nil, fmt.Errorf("plan: encode node %s: %w", p.Node, err)
	}
	compact := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	b := append(indent(make([]byte, 0, len(compact)*3/2), compact), '\n')
	sum := sha256.Sum256(b)
	p.Digest = "sha256:" + hex.EncodeToString(sum[:])
	// The first `"digest": ""` is the top-level one: the fields before it
	// (formatVersion, kind, node) cannot hold a quote unescaped.
	placeholder := []byte(`"digest": ""`)
	i := bytes.Index(b, placeholder)
	if i < 0 {
		return nil, fmt.Errorf("plan: encode node %s: no digest placeholder", p.Node)
	}
	out := make([]byte, 0, len(b)+len(p.Digest))
	out = append(out, b[:i]...)
	out = append(out, `"digest": "`+p.Digest+`"`...)
	out = append(out, b[i+len(placeholder):]...)
	return out, nil
}

// A DecodeError says why a plan was rejected.
type DecodeError struct {
	Node string // the node the reader expected, if any
	Err  error
}

func (e *DecodeError) Error() string {
	if e.Node != "" {
		return fmt.Sprintf("plan for node %s: %v", e.Node, e.Err)
	}
	return "plan: " + e.Err.Error()
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Errors Decode wraps in a *DecodeError.
var (
	ErrDigest        = errors.New("digest does not match the content: the plan is corrupt or was edited")
	ErrMajorVersion  = errors.New("unsupported formatVersion")
	ErrForeignNode   = errors.New("the plan is for another node")
	ErrNotANodePlan  = errors.New("not a NodePlan")
	ErrMissingDigest = errors.New("the plan has no digest")
)

// Decode reads a plan file and verifies it: at most MaxSize bytes, a NodePlan of format major 1,
// for node (unless node is ""), whose digest matches its bytes. Fields it
// does not know are ignored. A plan that fails any check is returned as a
// *DecodeError and must not be applied.
func Decode(data []byte, node string) (*NodePlan, error) {
	fail := func(err error) (*NodePlan, error) { return nil, &DecodeError{Node: node, Err: err} }
	if len(data) > MaxSize {
		return fail(fmt.Errorf("%w: %d bytes, more than a plan's %d", ErrTooLarge, len(data), MaxSize))
	}
	var p NodePlan
	if err := json.Unmarshal(data, &p); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fail(fmt.Errorf("not valid JSON (truncated?): %w", err))
		}
		// Well-formed JSON with a value of the wrong type or form (an
		// address that does not parse, a port over 65535): the content
		// is wrong, not cut short.
		return fail(fmt.Errorf("%w: %w", ErrInvalid, err))
	}
	if p.Kind != Kind {
		return fail(fmt.Errorf("%w: kind is %q", ErrNotANodePlan, p.Kind))
	}
	if major, _, _ := strings.Cut(p.FormatVersion, "."); major != FormatVersion {
		return fail(fmt.Errorf("%w %q: this version reads %s.x", ErrMajorVersion, p.FormatVersion, FormatVersion))
	}
	if node != "" && p.Node != node {
		return fail(fmt.Errorf("%w: %q", ErrForeignNode, p.Node))
	}
	if p.Digest == "" {
		return fail(ErrMissingDigest)
	}
	sum, err := digestOf(data)
	if err != nil {
		return fail(err)
	}
	if sum != p.Digest {
		return fail(ErrDigest)
	}
	return &p, nil
}

// digestOf hashes data with the top-level digest value emptied. It finds
// the member by tokenizing the top-level object, so any JSON formatting of
// the file hashes consistently with how it was written.
func digestOf(data []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", errors.New("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", err
		}
		key, _ := t.(string)
		start := dec.InputOffset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", err
		}
		end := dec.InputOffset()
		if key != "digest" {
			continue
		}
		seg := data[start:end]
		q := bytes.IndexByte(seg, '"')
		if q < 0 {
			return "", errors.New("digest is not a string")
		}
		h := sha256.New()
		io.Copy(h, bytes.NewReader(data[:int(start)+q]))
		h.Write([]byte(`""`))
		h.Write(data[end:])
		return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
	}
	return "", ErrMissingDigest
}
