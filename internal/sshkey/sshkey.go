// Package sshkey reads OpenSSH ed25519 keys for plan signing: a private
// key as `ssh-keygen -t ed25519` writes it (the signer's, in CI), and
// public keys in authorized_keys form (the agent's trusted keys). It
// turns them into the crypto/ed25519 keys that compiler/plan signs and
// verifies with, so that compiler/plan stays standard library only and
// the OpenSSH formats are parsed by golang.org/x/crypto/ssh, which
// OpenSSH's own format quirks are tested against.
package sshkey

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/crypto/ssh"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

// maxKeyFile bounds a key file that is read: an authorized_keys file of a
// few hundred keys is well under it.
const maxKeyFile = 1 << 20

// maxErrors is how many bad lines are reported before giving up: a file
// that is not authorized_keys at all says so in a few lines.
const maxErrors = 10

// ReadPrivateKey reads the ed25519 private key in the OpenSSH key file
// path. An encrypted key, or a key of another type, is an error that says
// what to use instead.
func ReadPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePrivateKey(data, path)
}

// ParsePrivateKey parses an unencrypted OpenSSH (or PKCS#8) ed25519
// private key; name is where it came from, for messages.
func ParsePrivateKey(data []byte, name string) (ed25519.PrivateKey, error) {
	k, err := ssh.ParseRawPrivateKey(data)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		return nil, fmt.Errorf("%s: the key is encrypted with a passphrase; hnsplan reads no passphrase and does not use ssh-agent: sign with an unencrypted deploy key kept in the CI's secret store (ssh-keygen -t ed25519 -N '' -f KEY)", name)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: not an OpenSSH private key: %v; create one with ssh-keygen -t ed25519 -N '' -f KEY", name, err)
	}
	switch k := k.(type) {
	case *ed25519.PrivateKey:
		return *k, nil
	case ed25519.PrivateKey:
		return k, nil
	}
	return nil, fmt.Errorf("%s: the key is %s, not ed25519; plans are signed with ed25519 keys only: create one with ssh-keygen -t ed25519 -N '' -f KEY", name, keyKind(k))
}

// keyKind names a private key's type for messages.
func keyKind(k any) string {
	t := fmt.Sprintf("%T", k) // *rsa.PrivateKey, *ecdsa.PrivateKey, ...
	t = strings.TrimPrefix(t, "*")
	t, _, _ = strings.Cut(t, ".")
	return strings.ToUpper(t)
}

// ReadAuthorizedKeys reads the trusted keys in path: OpenSSH public keys
// in authorized_keys form, one a line ("ssh-ed25519 AAAA... comment"),
// blank lines and lines starting with # ignored. Every key must be
// ed25519, and there must be at least one: a trust file that trusts
// nothing is a mistake, not a policy.
func ReadAuthorizedKeys(path string) (plan.Keyring, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	ring, err := ParseAuthorizedKeys(data, path)
	if err == nil && len(ring) == 0 {
		err = fmt.Errorf("%s: no keys: list the public keys plans are signed with, one a line (the .pub files ssh-keygen writes)", path)
	}
	return ring, err
}

// ParseAuthorizedKeys parses authorized_keys text; name is where it came
// from, for messages ("name:line: ..."). It returns every ed25519 key, in
// order, without duplicates; any other line is an error.
func ParseAuthorizedKeys(data []byte, name string) (plan.Keyring, error) {
	var ring plan.Keyring
	var errs []error
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxKeyFile)
	for n := 1; sc.Scan() && len(errs) < maxErrors; n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("%s:%d", name, n)
		pub, comment, options, _, err := ssh.ParseAuthorizedKey([]byte(line))
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: not an OpenSSH public key (%v): want a line like \"ssh-ed25519 AAAA... comment\", as in the .pub file ssh-keygen writes", where, err))
			continue
		}
		if len(options) > 0 {
			errs = append(errs, fmt.Errorf("%s: options (%s) are not supported: a trusted key is trusted for every plan; remove them", where, strings.Join(options, ",")))
			continue
		}
		cpk, ok := pub.(ssh.CryptoPublicKey)
		edKey, isEd := ed25519.PublicKey(nil), false
		if ok {
			edKey, isEd = cpk.CryptoPublicKey().(ed25519.PublicKey)
		}
		if !isEd || pub.Type() != ssh.KeyAlgoED25519 {
			errs = append(errs, fmt.Errorf("%s: the key is %s, not ed25519; plans are signed with ed25519 keys only", where, pub.Type()))
			continue
		}
		if seen[string(edKey)] {
			continue
		}
		seen[string(edKey)] = true
		ring = append(ring, plan.TrustedKey{Key: edKey, Comment: comment, Source: where})
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %v", name, err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ring, nil
}

// readFile reads a key file, at most maxKeyFile bytes of it.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(data) > maxKeyFile {
		return nil, fmt.Errorf("%s: more than %d bytes: not a key file", path, maxKeyFile)
	}
	return data, nil
}
