package planwatch

import (
	"errors"
	"fmt"
	"sync"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// A Trust is the set of keys a source requires plans to be signed with.
// A source with a nil Trust delivers unsigned plans (digest only: integrity,
// not authorship); with one, it delivers only plans whose signature one of
// the keys verifies, and refuses every plan while the Trust holds no key.
//
// The keys come from a file on the node (fixed for the agent's life) or
// from a TrustedKeys ConfigMap watcher, which replaces them; each change
// makes the sources read their plan again, so a plan refused for want of
// a key is delivered once the key arrives, and a plan signed by a key
// that was removed is refused (the last good plan stays in force).
type Trust struct {
	mu      sync.Mutex
	ring    plan.Keyring
	why     error // why there are no keys, when there are none
	changed chan struct{}
}

// NewTrust returns a Trust holding ring.
func NewTrust(ring plan.Keyring) *Trust {
	return &Trust{ring: ring, changed: make(chan struct{}, 1)}
}

// Set replaces the keys. why says why there are none (the ConfigMap is
// missing, a line does not parse), for the sources' rejections; it is
// ignored when ring has keys.
func (t *Trust) Set(ring plan.Keyring, why error) {
	t.mu.Lock()
	t.ring, t.why = ring, why
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// Keys returns the keys, and why there are none.
func (t *Trust) Keys() (plan.Keyring, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.ring) == 0 {
		return nil, t.why
	}
	return t.ring, nil
}

// changes fires after Set. One source listens; a nil Trust never fires.
func (t *Trust) changes() <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.changed
}

// verify checks sig against the keys and returns the signer's
// fingerprint. A nil Trust verifies nothing and returns "".
func (t *Trust) verify(data, sig []byte) (string, error) {
	if t == nil {
		return "", nil
	}
	ring, why := t.Keys()
	k, err := ring.Verify(data, sig)
	if err != nil && why != nil && errors.Is(err, plan.ErrNoTrustedKeys) {
		err = &plan.SignatureError{Err: fmt.Errorf("%w: %w", plan.ErrNoTrustedKeys, why)}
	}
	if err != nil {
		return "", err
	}
	return k.String(), nil
}
