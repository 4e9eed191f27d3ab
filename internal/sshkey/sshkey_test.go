package sshkey

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/hnsplan/hnsplan/compiler/plan"
)

func newKey(t *testing.T) (ed25519.PrivateKey, string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return priv, strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
}

func write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadPrivateKey(t *testing.T) {
	priv, _ := newKey(t)
	plain, err := ssh.MarshalPrivateKey(priv, "ci@example")
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ssh.MarshalPrivateKeyWithPassphrase(priv, "ci@example", []byte("secret"))
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM, err := ssh.MarshalPrivateKey(rsaKey, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		want []string // in the error; none: accepted
	}{
		{name: "openssh ed25519", data: pem.EncodeToMemory(plain)},
		{name: "encrypted", data: pem.EncodeToMemory(enc), want: []string{"encrypted with a passphrase", "unencrypted deploy key", "ssh-agent"}},
		{name: "rsa", data: pem.EncodeToMemory(rsaPEM), want: []string{"the key is RSA", "ed25519 keys only", "ssh-keygen -t ed25519"}},
		{name: "a public key", data: []byte("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHh0 x\n"), want: []string{"not an OpenSSH private key"}},
		{name: "empty", data: nil, want: []string{"not an OpenSSH private key"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := write(t, "key", tt.data)
			k, err := ReadPrivateKey(path)
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if !k.Equal(priv) {
					t.Fatal("read another key")
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range append(tt.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
		})
	}
	if _, err := ReadPrivateKey(filepath.Join(t.TempDir(), "absent")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent file: %v", err)
	}
}

func TestReadAuthorizedKeys(t *testing.T) {
	_, a := newKey(t)
	_, b := newKey(t)
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, _ := ssh.NewPublicKey(&rsaKey.PublicKey)
	rsaLine := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(rsaPub)))

	tests := []struct {
		name string
		text string
		keys []string // comments of the keys read, in order
		want []string // in the error
	}{
		{name: "two keys for a rotation", text: "# CI keys\n" + a + " old\n\n" + b + " new\n", keys: []string{"old", "new"}},
		{name: "duplicate kept once", text: a + " one\n" + a + " again\n", keys: []string{"one"}},
		{name: "CRLF and indent", text: "  " + a + " win\r\n", keys: []string{"win"}},
		{name: "rsa key", text: a + " ok\n" + rsaLine + " rsa\n", want: []string{":2: the key is ssh-rsa, not ed25519", "ed25519 keys only"}},
		{name: "options", text: `from="10.0.0.0/8" ` + a + " x\n", want: []string{":1: options", "not supported"}},
		{name: "garbage", text: "# fine\nnot a key\n", want: []string{":2: not an OpenSSH public key"}},
		{name: "no keys", text: "# nothing yet\n\n", want: []string{"no keys"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := write(t, "trusted", []byte(tt.text))
			ring, err := ReadAuthorizedKeys(path)
			if len(tt.want) > 0 {
				if err == nil {
					t.Fatalf("accepted: %v", ring)
				}
				for _, w := range tt.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error does not say %q: %v", w, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, k := range ring {
				got = append(got, k.Comment)
			}
			if strings.Join(got, ",") != strings.Join(tt.keys, ",") {
				t.Errorf("keys %q, want %q", got, tt.keys)
			}
		})
	}
}

// TestSignAndVerifyWithOpenSSH: a key read from its OpenSSH file signs a
// plan that the trusted keys read from the .pub line verify.
func TestSignAndVerifyWithOpenSSH(t *testing.T) {
	priv, pub := newKey(t)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ReadPrivateKey(write(t, "id", pem.EncodeToMemory(block)))
	if err != nil {
		t.Fatal(err)
	}
	ring, err := ParseAuthorizedKeys([]byte(pub+" ci\n"), "trusted")
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"node": "win-1"}` + "\n")
	if got, err := ring.Verify(data, plan.Sign(data, k)); err != nil || got.Comment != "ci" {
		t.Fatalf("Verify = %v, %v", got, err)
	}
}

// TestOpenSSHInterop runs ssh-keygen, when it is installed: a key it
// generates is read, its fingerprint is the one ssh-keygen -l prints, a
// plan signed here verifies with ssh-keygen -Y verify, and one signed by
// ssh-keygen -Y sign verifies here.
func TestOpenSSHInterop(t *testing.T) {
	bin, err := exec.LookPath("ssh-keygen")
	if err != nil {
		t.Skip("ssh-keygen not installed")
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	run := func(stdin []byte, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Stdin = bytes.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("ssh-keygen %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run(nil, "-q", "-t", "ed25519", "-N", "", "-C", "deploy@ci", "-f", key)
	priv, err := ReadPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := ReadAuthorizedKeys(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if fp := strings.Fields(run(nil, "-l", "-E", "sha256", "-f", key+".pub"))[1]; fp != ring[0].Fingerprint() {
		t.Errorf("fingerprint %s, ssh-keygen says %s", ring[0].Fingerprint(), fp)
	}

	data := []byte("{\n  \"formatVersion\": \"1\",\n  \"node\": \"win-1\"\n}\n")
	planFile := filepath.Join(dir, "win-1.json")
	if err := os.WriteFile(planFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plan.SignatureFile(planFile), plan.Sign(data, priv), 0o644); err != nil {
		t.Fatal(err)
	}
	pubLine, _ := os.ReadFile(key + ".pub")
	signers := filepath.Join(dir, "allowed_signers")
	if err := os.WriteFile(signers, append([]byte("hnsplan "), pubLine...), 0o644); err != nil {
		t.Fatal(err)
	}
	run(data, "-Y", "verify", "-f", signers, "-I", "hnsplan", "-n", plan.SignatureNamespace, "-s", plan.SignatureFile(planFile))

	// ssh-keygen's own signature of the same file.
	other := filepath.Join(dir, "other.json")
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run(nil, "-Y", "sign", "-f", key, "-n", plan.SignatureNamespace, other)
	theirs, err := os.ReadFile(other + ".sig")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Verify(data, theirs); err != nil {
		t.Fatalf("ssh-keygen's signature: %v", err)
	}
	if !bytes.Equal(theirs, plan.Sign(data, priv)) {
		t.Errorf("ssh-keygen signs the same bytes differently:\n%s\nours:\n%s", theirs, plan.Sign(data, priv))
	}
	// A signature for another namespace (git's) is not a plan's.
	gitFile := filepath.Join(dir, "commit")
	if err := os.WriteFile(gitFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run(nil, "-Y", "sign", "-f", key, "-n", "git", gitFile)
	gitSig, _ := os.ReadFile(gitFile + ".sig")
	if _, err := ring.Verify(data, gitSig); !errors.Is(err, plan.ErrMalformedSignature) {
		t.Errorf("a git-namespace signature: %v, want ErrMalformedSignature", err)
	}
}
