package plan

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"strings"
)

// Plan signatures are SSH signatures (OpenSSH's PROTOCOL.sshsig, what
// `ssh-keygen -Y sign` writes) with ed25519 keys, detached: the plan file
// is not changed by signing, and its signature is a second file (or a
// second ConfigMap key) named by SignatureFile. The signature covers the
// plan file's exact bytes, so it binds everything the agent reads from
// them: node, formatVersion, digest and content. Verifying with OpenSSH:
//
//	ssh-keygen -Y verify -f allowed_signers -I hnsplan -n hnsplan-plan -s win-1.json.sig < win-1.json
//
// This file is the standard library's share of the job: ed25519 over raw
// keys. Reading OpenSSH key files is internal/sshkey's.

// SignatureNamespace is the SSHSIG namespace of plan signatures. A
// signature made for another purpose with the same key (a git commit, a
// file signed with -n file) does not verify as a plan's.
const SignatureNamespace = "hnsplan-plan"

// MaxSignatureSize bounds a signature file that is read: an ed25519 SSH
// signature is under 300 bytes.
const MaxSignatureSize = 8 << 10

// SignatureFile returns the name of the detached signature of the plan
// file named planFile (a file name, a path or a ConfigMap key): planFile
// with ".sig" appended. Every writer and reader of signatures derives the
// name here, so it follows however plan files are named.
func SignatureFile(planFile string) string { return planFile + ".sig" }

const (
	sigMagic     = "SSHSIG"
	sigVersion   = 1
	sigKeyType   = "ssh-ed25519"
	sigHash      = "sha512" // what ssh-keygen uses by default
	armorBegin   = "-----BEGIN SSH SIGNATURE-----"
	armorEnd     = "-----END SSH SIGNATURE-----"
	armorColumns = 70 // ssh-keygen's line length
)

// A TrustedKey is a public key the agent accepts plans from.
type TrustedKey struct {
	Key     ed25519.PublicKey
	Comment string // the authorized_keys line's comment, for messages
	Source  string // where it was read, "FILE:LINE", for messages
}

// Fingerprint is the key's fingerprint as `ssh-keygen -l` prints it:
// "SHA256:" and the unpadded base64 of the hash of its wire form.
func (k TrustedKey) Fingerprint() string { return Fingerprint(k.Key) }

// String is the fingerprint and, if there is one, the comment.
func (k TrustedKey) String() string {
	if k.Comment == "" {
		return k.Fingerprint()
	}
	return k.Fingerprint() + " (" + k.Comment + ")"
}

// Fingerprint returns key's SHA256 fingerprint as ssh-keygen prints it.
func Fingerprint(key ed25519.PublicKey) string {
	sum := sha256.Sum256(publicKeyBlob(key))
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// Sign returns the armored SSH signature of data (a plan file's bytes)
// by key. Ed25519 signatures are deterministic, so signing the same plan
// with the same key gives the same bytes.
func Sign(data []byte, key ed25519.PrivateKey) []byte {
	pub := key.Public().(ed25519.PublicKey)
	sig := ed25519.Sign(key, signedData(SignatureNamespace, "", sigHash, data))
	var blob []byte
	blob = append(blob, sigMagic...)
	blob = binary.BigEndian.AppendUint32(blob, sigVersion)
	blob = appendString(blob, publicKeyBlob(pub))
	blob = appendString(blob, []byte(SignatureNamespace))
	blob = appendString(blob, nil) // reserved
	blob = appendString(blob, []byte(sigHash))
	blob = appendString(blob, appendString(appendString(nil, []byte(sigKeyType)), sig))

	b64 := base64.StdEncoding.EncodeToString(blob)
	var out bytes.Buffer
	out.WriteString(armorBegin + "\n")
	for len(b64) > armorColumns {
		out.WriteString(b64[:armorColumns] + "\n")
		b64 = b64[armorColumns:]
	}
	out.WriteString(b64 + "\n" + armorEnd + "\n")
	return out.Bytes()
}

// Errors a *SignatureError wraps.
var (
	ErrUnsigned           = errors.New("the plan is not signed")
	ErrUntrustedSigner    = errors.New("the plan is signed by a key this agent does not trust")
	ErrBadSignature       = errors.New("the signature does not match the plan: the plan or its signature was changed after signing")
	ErrMalformedSignature = errors.New("the signature is not an hnsplan plan signature")
	ErrNoTrustedKeys      = errors.New("no trusted keys are configured")
)

// A SignatureError says why a plan's signature was refused.
type SignatureError struct {
	Signer  string  // the signing key's fingerprint, when the signature names one
	Trusted Keyring // the keys that would have been accepted
	Err     error   // one of the Err* above, possibly wrapped with detail
}

func (e *SignatureError) Error() string {
	msg := e.Err.Error()
	if e.Signer != "" && !errors.Is(e.Err, ErrBadSignature) {
		msg += " (" + e.Signer + ")"
	} else if e.Signer != "" {
		msg += " (signed by " + e.Signer + ")"
	}
	return msg + "; trusted keys: " + e.Trusted.String()
}

func (e *SignatureError) Unwrap() error { return e.Err }

// A Keyring is the set of keys plans are accepted from: several during a
// key rotation.
type Keyring []TrustedKey

// String lists the keys' fingerprints (and comments), or says there are
// none.
func (r Keyring) String() string {
	if len(r) == 0 {
		return "none"
	}
	s := make([]string, len(r))
	for i, k := range r {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}

// Verify checks that sig is a plan signature of data by one of the
// ring's keys, and returns that key. A nil or empty sig is ErrUnsigned.
// Errors are *SignatureError. Verify says nothing about the plan's
// content: Decode and Validate still apply.
func (r Keyring) Verify(data, sig []byte) (TrustedKey, error) {
	fail := func(signer string, err error) (TrustedKey, error) {
		return TrustedKey{}, &SignatureError{Signer: signer, Trusted: r, Err: err}
	}
	if len(r) == 0 {
		return fail("", ErrNoTrustedKeys)
	}
	if len(bytes.TrimSpace(sig)) == 0 {
		return fail("", ErrUnsigned)
	}
	s, err := parseSignature(sig)
	if err != nil {
		return fail("", fmt.Errorf("%w: %v", ErrMalformedSignature, err))
	}
	signer := Fingerprint(s.key)
	for _, k := range r {
		if !k.Key.Equal(s.key) {
			continue
		}
		if !s.verify(data) {
			return fail(signer, ErrBadSignature)
		}
		return k, nil
	}
	return fail(signer, ErrUntrustedSigner)
}

// SignerOf checks that sig is a plan signature of data by the key it
// names, whichever that is, and returns the key's fingerprint. It proves
// nothing about who signed (anyone can sign with a key of their own); it
// catches a signature left over from other bytes before it is published.
func SignerOf(data, sig []byte) (string, error) {
	s, err := parseSignature(sig)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrMalformedSignature, err)
	}
	if !s.verify(data) {
		return Fingerprint(s.key), fmt.Errorf("%w (signed by %s)", ErrBadSignature, Fingerprint(s.key))
	}
	return Fingerprint(s.key), nil
}

// signature is a parsed SSHSIG blob.
type signature struct {
	key                       ed25519.PublicKey
	namespace, reserved, hash string
	sig                       []byte
}

func (s *signature) verify(data []byte) bool {
	return ed25519.Verify(s.key, signedData(s.namespace, s.reserved, s.hash, data), s.sig)
}

// parseSignature reads an armored SSHSIG of an ed25519 key in the plan
// namespace.
func parseSignature(armored []byte) (*signature, error) {
	if len(armored) > MaxSignatureSize {
		return nil, fmt.Errorf("it is %d bytes, more than %d", len(armored), MaxSignatureSize)
	}
	text := strings.TrimSpace(strings.ReplaceAll(string(armored), "\r\n", "\n"))
	body, ok := strings.CutPrefix(text, armorBegin)
	if ok {
		body, ok = strings.CutSuffix(body, armorEnd)
	}
	if !ok {
		return nil, fmt.Errorf("no %q ... %q armor", armorBegin, armorEnd)
	}
	blob, err := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(body), ""))
	if err != nil {
		return nil, fmt.Errorf("base64: %v", err)
	}
	r := reader{b: blob}
	if magic := r.bytes(len(sigMagic)); string(magic) != sigMagic {
		return nil, errors.New("no SSHSIG preamble")
	}
	if v := r.uint32(); v != sigVersion {
		return nil, fmt.Errorf("SSHSIG version %d, want %d", v, sigVersion)
	}
	pubBlob := r.string()
	var s signature
	s.namespace, s.reserved, s.hash = string(r.string()), string(r.string()), string(r.string())
	sigBlob := r.string()
	if r.err != nil || len(r.b) != 0 {
		return nil, errors.New("truncated or trailing data")
	}
	pr := reader{b: pubBlob}
	if t := string(pr.string()); t != sigKeyType {
		return nil, fmt.Errorf("signed with a %q key; plans are signed with ed25519 keys", t)
	}
	key := pr.string()
	if pr.err != nil || len(pr.b) != 0 || len(key) != ed25519.PublicKeySize {
		return nil, errors.New("bad ed25519 public key")
	}
	s.key = ed25519.PublicKey(key)
	if s.namespace != SignatureNamespace {
		return nil, fmt.Errorf("signed for namespace %q, not %q", s.namespace, SignatureNamespace)
	}
	if s.hash != "sha512" && s.hash != "sha256" {
		return nil, fmt.Errorf("hash algorithm %q", s.hash)
	}
	sr := reader{b: sigBlob}
	if t := string(sr.string()); t != sigKeyType {
		return nil, fmt.Errorf("signature type %q, want %s", t, sigKeyType)
	}
	s.sig = sr.string()
	if sr.err != nil || len(sr.b) != 0 || len(s.sig) != ed25519.SignatureSize {
		return nil, errors.New("bad ed25519 signature")
	}
	return &s, nil
}

// signedData is what an SSHSIG signs: the preamble, namespace, reserved,
// hash algorithm and the hash of the message.
func signedData(namespace, reserved, hashAlg string, data []byte) []byte {
	var h hash.Hash = sha512.New()
	if hashAlg == "sha256" {
		h = sha256.New()
	}
	h.Write(data)
	out := []byte(sigMagic)
	out = appendString(out, []byte(namespace))
	out = appendString(out, []byte(reserved))
	out = appendString(out, []byte(hashAlg))
	return appendString(out, h.Sum(nil))
}

// publicKeyBlob is an ed25519 key's SSH wire form.
func publicKeyBlob(key ed25519.PublicKey) []byte {
	return appendString(appendString(nil, []byte(sigKeyType)), key)
}

// appendString appends an SSH wire string: a uint32 length, the bytes.
func appendString(b, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// reader reads SSH wire data; its first failure sticks in err.
type reader struct {
	b   []byte
	err error
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b) {
		r.err = errors.New("truncated")
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) uint32() uint32 {
	b := r.bytes(4)
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

func (r *reader) string() []byte {
	n := r.uint32()
	if r.err != nil || uint64(n) > uint64(len(r.b)) {
		r.err = errors.New("truncated")
		return nil
	}
	return r.bytes(int(n))
}
