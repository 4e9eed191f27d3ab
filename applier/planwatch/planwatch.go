// Package planwatch delivers this node's plan to the agent: from a file
// (fsnotify on the plan's directory) or from a ConfigMap (a client-go
// informer on hnsplan-system/plan-<node>).
//
// A source reads whatever is published, verifies it with plan.Decode for
// this node, checks its meaning with plan.Validate, and delivers an Update: a verified plan, or a rejection that
// says what is wrong and where. Sources are level-based, like a
// controller: an Update describes what is published now, not what
// happened, so a missed event costs nothing but latency, and the periodic
// resync re-reads as a safety net.
package planwatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hnsplan/hnsplan/compiler/plan"
	"github.com/hnsplan/hnsplan/internal/buildinfo"
)

// An Update is what a source delivers: a verified plan, or a rejection.
//
// Exactly one of Plan and Err is set. On a rejection the caller keeps the
// last good plan in force: a rejection never means "remove everything".
type Update struct {
	// Plan is the verified plan: plan.Decode accepted it for this node
	// (format major, node name and digest) and plan.Validate its
	// meaning. Nil on a rejection.
	Plan *plan.NodePlan
	// Raw is the bytes as read, for a plan or a rejection; nil when there
	// was nothing to read (file absent, ConfigMap deleted). The caller
	// must not modify it.
	Raw []byte
	// Source names where the update came from: the file's path, or
	// "configmap hnsplan-system/plan-<node>".
	Source string
	// Signer is the trusted key that signed the plan, its fingerprint
	// and comment; "" when the source has no Trust.
	Signer string
	// Err is a *Error saying why nothing was delivered: errors.Is(Err,
	// ErrAbsent) when nothing is published, or a wrapped *plan.DecodeError
	// (errors.Is(Err, plan.ErrDigest), ...), *plan.SignatureError
	// (errors.Is(Err, plan.ErrUnsigned), ...) or *plan.ValidationError
	// (errors.Is(Err, plan.ErrInvalid)) when what is published was
	// rejected.
	Err error
}

// A Source watches one place where this node's plan is published and
// sends Updates until its context ends.
//
// Run sends an Update for what is published as soon as it has looked
// (a plan, a rejection, or ErrAbsent) and then one for every change. It
// never sends the same verified digest twice in a row, nor the same
// rejection twice in a row, so a resync that finds nothing new is silent;
// after a rejection the good plan is sent again. Sends block, so the
// caller must keep receiving; while it does not, changes pile up and the
// next read sends only the latest state, which is all a level-based
// caller needs.
//
// Run returns ctx.Err() when ctx ends, or an error if the source cannot
// watch at all (the plan's directory cannot be watched). A Source is not
// safe to Run twice at once.
type Source interface {
	Run(ctx context.Context, updates chan<- Update) error
}

// ErrAbsent is wrapped by an Update's Err when no plan is published: the
// file does not exist, or the ConfigMap does not exist.
var ErrAbsent = errors.New("no plan published")

// ErrNoKey is wrapped by an Update's Err when the ConfigMap exists but has
// no ConfigMapKey in its data.
var ErrNoKey = errors.New("no " + ConfigMapKey + " key")

// An Error is an Update's Err: what was wrong with what Source publishes,
// and what to do about it.
type Error struct {
	Source string // the file's path, or "configmap <namespace>/<name>"
	Msg    string // what is wrong and what to do, without Source
	Err    error  // ErrAbsent, ErrNoKey, a *plan.DecodeError, or a read error
}

func (e *Error) Error() string { return "planwatch: " + e.Source + ": " + e.Msg }

func (e *Error) Unwrap() error { return e.Err }

var _ error = (*Error)(nil)

// emitter turns what a source read into Updates and drops repeats. One per
// Run, used from one goroutine.
type emitter struct {
	node    string
	source  string
	what    string // "the file", "the ConfigMap": for messages
	updates chan<- Update
	last    string // key of the last Update sent; "" before the first
	good    bool   // a plan has been sent: a later absence keeps it
	existed bool   // the file or ConfigMap has been seen: its absence is a removal
	trust   *Trust // nil: plans need no signature
	sigName string // where the signature is read from, for messages
	parts   partCache
	// lastPlan is the plan digest and parts key of the last plan sent.
	lastPlan string
}

// data verifies raw's signature sig (with a Trust: who made the plan, before
// anything in it is believed), verifies raw itself, reads the parts it
// names through parts and assembles it with them (only when every part is
// published at what the plan names: never new routes with an old plan, or
// the reverse), checks its meaning (plan.Validate: whoever wrote a plan,
// the agent applies none that is hostile or nonsensical), and sends the
// plan or the rejection.
func (e *emitter) data(ctx context.Context, raw, sig []byte, parts partReader) error {
	signer, err := e.trust.verify(raw, sig)
	if err != nil {
		return e.reject(ctx, raw, err, e.signatureMsg(sig, err))
	}
	p, err := plan.Decode(raw, e.node)
	if err != nil {
		return e.reject(ctx, raw, err, e.decodeMsg(raw, err))
	}
	planKey := "plan " + p.Digest + " " + signer
	out := e.lookParts(p, planKey, parts)
	switch {
	case out.unchanged:
		return nil
	case out.err != nil:
		return e.reject(ctx, out.raw, out.err, out.msg)
	}
	if err := plan.Validate(p); err != nil {
		return e.reject(ctx, raw, err, e.decodeMsg(raw, err))
	}
	key := planKey + " " + out.key
	if err := e.send(ctx, key, Update{Plan: p, Raw: raw, Source: e.source, Signer: signer}); err != nil {
		return err
	}
	e.good, e.lastPlan = true, key
	return nil
}

// absent reports that nothing is published; why says what was seen
// ("does not exist", "was removed").
func (e *emitter) absent(ctx context.Context, why string) error {
	msg := fmt.Sprintf("%s: %s %s", ErrAbsent, e.what, why)
	if e.good {
		msg += "; the last good plan stays in force"
	} else {
		msg += "; waiting for it"
	}
	return e.reject(ctx, nil, ErrAbsent, msg)
}

// reject sends a rejection. Its key is its message and content, so a
// resync that reads the same bad bytes stays silent.
func (e *emitter) reject(ctx context.Context, raw []byte, err error, msg string) error {
	sum := sha256.Sum256(raw)
	key := "error " + msg + " " + hex.EncodeToString(sum[:])
	return e.send(ctx, key, Update{Raw: raw, Source: e.source, Err: &Error{Source: e.source, Msg: msg, Err: err}})
}

func (e *emitter) send(ctx context.Context, key string, u Update) error {
	if key == e.last {
		return nil
	}
	select {
	case e.updates <- u:
		e.last = key
		if u.Plan == nil {
			e.lastPlan = "" // the good plan is to be sent again
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// signatureMsg words a refused signature.
func (e *emitter) signatureMsg(_ []byte, err error) string { return SignatureRefusal(err, e.sigName) }

// SignatureRefusal words a plan refused for its signature (a
// *plan.SignatureError, which names the keys trusted) for the operator:
// what is wrong, then what to do. sigName says where the signature was
// looked for.
func SignatureRefusal(err error, sigName string) string {
	var se *plan.SignatureError
	if !errors.As(err, &se) {
		return fmt.Sprintf("refused: %v", err)
	}
	head, trusted := se.Err.Error(), "; trusted keys: "+se.Trusted.String()
	switch {
	case errors.Is(err, plan.ErrNoTrustedKeys):
		return fmt.Sprintf("refused: %s: no plan is applied until a trusted key is configured", head)
	case errors.Is(err, plan.ErrUnsigned):
		return fmt.Sprintf("refused: %s (no signature in %s)%s: sign it with hnsplan compile --sign-key or hnsplan publish --sign-key", head, sigName, trusted)
	case errors.Is(err, plan.ErrUntrustedSigner):
		return fmt.Sprintf("refused: %s (%s)%s: sign it with a trusted key, or add the signer's public key to the trusted keys if it is yours", head, se.Signer, trusted)
	}
	by := ""
	if se.Signer != "" {
		by = "signed by " + se.Signer + ", "
	}
	return fmt.Sprintf("refused: %s (%ssignature %s)%s: compile and sign the plan again; if nobody did, someone changed it", head, by, sigName, trusted)
}

// decodeMsg words a plan.Decode error for the operator who has to fix it:
// what is wrong, then what to do.
func (e *emitter) decodeMsg(raw []byte, err error) string {
	const fix = "compile it again with hnsplan compile and republish it"
	why := err
	var de *plan.DecodeError
	if errors.As(err, &de) {
		why = de.Err // its "plan for node X" prefix would repeat what Source says
	}
	var ve *plan.ValidationError
	if errors.As(err, &ve) {
		why = errors.New(strings.TrimPrefix(ve.Error(), "plan for node "+ve.Node+": "))
	}
	switch {
	case errors.Is(err, plan.ErrForeignNode):
		var head struct{ Node string }
		json.Unmarshal(raw, &head) // Decode already parsed it; only the name is wanted
		return fmt.Sprintf("plan for node %q, this is %q: publish the plan compiled for %q here", head.Node, e.node, e.node)
	case errors.Is(err, plan.ErrDigest):
		return fmt.Sprintf("%v: plans must not be edited by hand; %s", why, fix)
	case errors.Is(err, plan.ErrMajorVersion):
		return fmt.Sprintf("%v: %s", why, MajorVersionFix(raw))
	case errors.Is(err, plan.ErrNotANodePlan), errors.Is(err, plan.ErrMissingDigest):
		return fmt.Sprintf("%v: publish a plan written by hnsplan compile", why)
	case errors.Is(err, plan.ErrInvalid):
		// hnsplan compile never writes such a plan: it was made or
		// changed by something else.
		return fmt.Sprintf("%v: hnsplan compile never writes such a plan; %s", why, fix)
	}
	// Not JSON: most often a plan caught half-written. A complete write
	// (or an atomic rename) brings the next update.
	return fmt.Sprintf("%v: if it is being written, the complete plan will be picked up; otherwise %s", why, fix)
}

// MajorVersionFix says what to do about a plan or part of a format major
// this agent does not read: which hnsplan writes the format it reads.
func MajorVersionFix(raw []byte) string {
	var head struct{ FormatVersion string }
	json.Unmarshal(raw, &head) // Decode already parsed it; only the version is wanted
	m, _, _ := strings.Cut(head.FormatVersion, ".")
	major, err := strconv.Atoi(m)
	ours, _ := strconv.Atoi(plan.FormatVersion)
	agent := buildinfo.Get().Version
	if err == nil && major < ours {
		return fmt.Sprintf("compile and publish it with hnsplan %s (this agent's release, which writes format %s), or run the agent of the hnsplan release that compiled it; the last good plan stays in force", agent, plan.FormatVersion)
	}
	return fmt.Sprintf("this agent (hnsplan %s) reads format %s: upgrade the agent to the hnsplan release that compiled the plan, or compile it with hnsplan %s; the last good plan stays in force", agent, plan.FormatVersion, agent)
}
