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
	b, err := encodeDigested(p, &p.Digest)
	if err != nil {
		return nil, fmt.Errorf("plan: encode node %s: %w", p.Node, err)
	}
	return b, nil
}

// encodeDigested encodes v, whose top-level digest member is *digest, as
// Encode does a plan, and sets *digest.
func encodeDigested(v any, digest *string) ([]byte, error) {
	*digest = ""
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // "0E-2A-<ip hex>", not "\u003cip hex\u003e"
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	compact := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	b := append(indent(make([]byte, 0, len(compact)*3/2), compact), '\n')
	sum := sha256.Sum256(b)
	*digest = "sha256:" + hex.EncodeToString(sum[:])
	placeholder := []byte(`"digest": ""`)
	i := bytes.Index(b, placeholder)
	if i < 0 {
		return nil, errors.New("no digest placeholder")
	}
	out := make([]byte, 0, len(b)+len(*digest))
	out = append(out, b[:i]...)
	out = append(out, `"digest": "`+*digest+`"`...)
	out = append(out, b[i+len(placeholder):]...)
	return out, nil
}

// DecodeError is why a plan or a part was refused.
type DecodeError struct {
	Node string // the node the reader expected, if any
	Part string // the part the reader expected, for a part
	Err  error
}

func (e *DecodeError) Error() string {
	if e.Part != "" {
		return fmt.Sprintf("part %s: %v", e.Part, e.Err)
	}
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
	ErrWrongKind     = errors.New("not the part expected")
	ErrForeignPart   = errors.New("the part has another name")
)

// Decode reads a plan file and verifies it: at most MaxSize bytes, a
// NodePlan of format major 2, for node (unless node is ""), whose digest
// matches its bytes. Fields it does not know are ignored. A plan that
// fails any check is returned as a *DecodeError and must not be applied.
// The plan names its shared parts; Parts.Assemble attaches them.
func Decode(data []byte, node string) (*NodePlan, error) {
	var p NodePlan
	if err := verify(data, &p, Kind, MaxSize); err != nil {
		return nil, &DecodeError{Node: node, Err: err}
	}
	if node != "" && p.Node != node {
		return nil, &DecodeError{Node: node, Err: fmt.Errorf("%w: %q", ErrForeignNode, p.Node)}
	}
	return &p, nil
}

// DecodeRouteTable, DecodeRouteShard and DecodeProgramChunk read a part
// and verify it as Decode does a plan: at most MaxPartSize bytes, of its
// kind and format major, named name, whose digest matches its bytes.
func DecodeRouteTable(data []byte, name string) (*RouteTable, error) {
	return decodePart[RouteTable](data, name, KindRouteTable)
}

// DecodeRouteShard: see DecodeRouteTable.
func DecodeRouteShard(data []byte, name string) (*RouteShard, error) {
	return decodePart[RouteShard](data, name, KindRouteShard)
}

// DecodeProgramChunk: see DecodeRouteTable.
func DecodeProgramChunk(data []byte, name string) (*ProgramChunk, error) {
	return decodePart[ProgramChunk](data, name, KindProgramChunk)
}

func decodePart[T any, PT interface {
	*T
	digested
}](data []byte, name, kind string) (*T, error) {
	v := PT(new(T))
	if err := verify(data, v, kind, MaxPartSize); err != nil {
		return nil, &DecodeError{Part: name, Err: err}
	}
	if got := v.header().name; got != name {
		return nil, &DecodeError{Part: name, Err: fmt.Errorf("%w: the part is named %q", ErrForeignPart, got)}
	}
	return (*T)(v), nil
}

// digested is what verify checks of a plan or part.
type digested interface{ header() header }

type header struct{ formatVersion, kind, name, digest string }

func (p *NodePlan) header() header     { return header{p.FormatVersion, p.Kind, p.Node, p.Digest} }
func (t *RouteTable) header() header   { return header{t.FormatVersion, t.Kind, t.Name, t.Digest} }
func (s *RouteShard) header() header   { return header{s.FormatVersion, s.Kind, s.Name, s.Digest} }
func (c *ProgramChunk) header() header { return header{c.FormatVersion, c.Kind, c.Name, c.Digest} }

// verify decodes data into v and checks its size, kind, format major and
// digest.
func verify(data []byte, v digested, kind string, limit int) error {
	if len(data) > limit {
		return fmt.Errorf("%w: %d bytes, more than a %s's %d", ErrTooLarge, len(data), kind, limit)
	}
	if err := json.Unmarshal(data, v); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("not valid JSON (truncated?): %w", err)
		}
		// Well-formed JSON with a value of the wrong type or form (an
		// address that does not parse, a port over 65535): the content
		// is wrong, not cut short.
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	h := v.header()
	if h.kind != kind {
		if kind == Kind {
			return fmt.Errorf("%w: kind is %q", ErrNotANodePlan, h.kind)
		}
		return fmt.Errorf("%w: kind is %q, not %s", ErrWrongKind, h.kind, kind)
	}
	if major, _, _ := strings.Cut(h.formatVersion, "."); major != FormatVersion {
		if major == "1" {
			return fmt.Errorf("%w %q: this version reads %s.x; format 1 (every route and the whole policy program inside each plan) is written by hnsplan releases before the split into parts", ErrMajorVersion, h.formatVersion, FormatVersion)
		}
		return fmt.Errorf("%w %q: this version reads %s.x", ErrMajorVersion, h.formatVersion, FormatVersion)
	}
	if h.digest == "" {
		return ErrMissingDigest
	}
	sum, err := digestOf(data)
	if err != nil {
		return err
	}
	if sum != h.digest {
		return ErrDigest
	}
	return nil
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
