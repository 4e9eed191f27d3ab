package plan

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

// testKey is a deterministic ed25519 key from a one-byte seed.
func testKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func trusted(keys ...ed25519.PrivateKey) Keyring {
	var r Keyring
	for i, k := range keys {
		r = append(r, TrustedKey{Key: k.Public().(ed25519.PublicKey), Comment: "key" + string(rune('A'+i))})
	}
	return r
}

func encodedPlan(t *testing.T, node string) []byte {
	t.Helper()
	p := samplePlan()
	p.Node = node
	data, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSignVerify(t *testing.T) {
	data := encodedPlan(t, "win-1")
	a, b, c := testKey(1), testKey(2), testKey(3)
	sigA := Sign(data, a)
	if again := Sign(data, a); !bytes.Equal(sigA, again) {
		t.Fatalf("signing twice gave different bytes:\n%s\n%s", sigA, again)
	}
	if !bytes.HasPrefix(sigA, []byte(armorBegin+"\n")) || !bytes.HasSuffix(sigA, []byte(armorEnd+"\n")) {
		t.Fatalf("not armored:\n%s", sigA)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(sigA)), "\n") {
		if len(line) > armorColumns {
			t.Errorf("line longer than %d columns: %q", armorColumns, line)
		}
	}
	tamperedPlan := bytes.Replace(data, []byte(`"cluster": "demo"`), []byte(`"cluster": "derp"`), 1)
	if bytes.Equal(tamperedPlan, data) {
		t.Fatal("the tamper did not change the plan")
	}
	// A byte of the signature itself: the last byte of the ed25519
	// signature sits just before the armor's last base64 characters.
	blob, _ := base64.StdEncoding.DecodeString(strings.Join(strings.Fields(strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(string(sigA)), armorBegin), armorEnd)), ""))
	blob[len(blob)-1] ^= 1
	tamperedSig := []byte(armorBegin + "\n" + base64.StdEncoding.EncodeToString(blob) + "\n" + armorEnd + "\n")

	tests := []struct {
		name    string
		ring    Keyring
		data    []byte
		sig     []byte
		want    error  // nil: accepted
		signer  string // the key it must return, or name in the error
		mention []string
	}{
		{name: "trusted key", ring: trusted(a), data: data, sig: sigA, signer: Fingerprint(a.Public().(ed25519.PublicKey))},
		{name: "rotation: old key still listed", ring: trusted(b, a), data: data, sig: sigA, signer: Fingerprint(a.Public().(ed25519.PublicKey))},
		{name: "rotation: new key", ring: trusted(b, a), data: data, sig: Sign(data, b), signer: Fingerprint(b.Public().(ed25519.PublicKey))},
		{name: "rotation done: old key dropped", ring: trusted(b), data: data, sig: sigA, want: ErrUntrustedSigner,
			mention: []string{Fingerprint(a.Public().(ed25519.PublicKey)), Fingerprint(b.Public().(ed25519.PublicKey))}},
		{name: "wrong key", ring: trusted(a, b), data: data, sig: Sign(data, c), want: ErrUntrustedSigner,
			mention: []string{Fingerprint(c.Public().(ed25519.PublicKey)), Fingerprint(a.Public().(ed25519.PublicKey)) + " (keyA)", "(keyB)"}},
		{name: "tampered plan byte", ring: trusted(a), data: tamperedPlan, sig: sigA, want: ErrBadSignature},
		{name: "tampered signature byte", ring: trusted(a), data: data, sig: tamperedSig, want: ErrBadSignature},
		{name: "plan relabelled for another node", ring: trusted(a), data: bytes.Replace(encodedPlan(t, "win-2"), []byte(`"node": "win-2"`), []byte(`"node": "win-1"`), 1),
			sig: Sign(encodedPlan(t, "win-2"), a), want: ErrBadSignature},
		{name: "unsigned", ring: trusted(a), data: data, sig: nil, want: ErrUnsigned, mention: []string{"keyA"}},
		{name: "blank signature file", ring: trusted(a), data: data, sig: []byte("\n"), want: ErrUnsigned},
		{name: "no trusted keys", ring: nil, data: data, sig: sigA, want: ErrNoTrustedKeys},
		{name: "not armored", ring: trusted(a), data: data, sig: []byte("hello"), want: ErrMalformedSignature},
		{name: "truncated", ring: trusted(a), data: data, sig: []byte(armorBegin + "\nU1NIU0lHAAAAAQ==\n" + armorEnd), want: ErrMalformedSignature},
		{name: "another namespace", ring: trusted(a), data: data, sig: signNS(data, a, "file"), want: ErrMalformedSignature, mention: []string{`namespace "file"`}},
		{name: "oversized", ring: trusted(a), data: data, sig: bytes.Repeat([]byte("A"), MaxSignatureSize+1), want: ErrMalformedSignature},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := tt.ring.Verify(tt.data, tt.sig)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if k.Fingerprint() != tt.signer {
					t.Errorf("signer %s, want %s", k.Fingerprint(), tt.signer)
				}
				return
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			var se *SignatureError
			if !errors.As(err, &se) {
				t.Fatalf("%T is not a *SignatureError", err)
			}
			for _, m := range append(tt.mention, "trusted keys: ") {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("message does not mention %q: %v", m, err)
				}
			}
		})
	}
}

// signNS signs as Sign does but for another namespace.
func signNS(data []byte, key ed25519.PrivateKey, ns string) []byte {
	sig := ed25519.Sign(key, signedData(ns, "", sigHash, data))
	blob := []byte(sigMagic)
	blob = append(blob, 0, 0, 0, 1)
	blob = appendString(blob, publicKeyBlob(key.Public().(ed25519.PublicKey)))
	blob = appendString(blob, []byte(ns))
	blob = appendString(blob, nil)
	blob = appendString(blob, []byte(sigHash))
	blob = appendString(blob, appendString(appendString(nil, []byte(sigKeyType)), sig))
	return []byte(armorBegin + "\n" + base64.StdEncoding.EncodeToString(blob) + "\n" + armorEnd + "\n")
}

// TestSignedNodeIsBound: a plan signed for one node verifies, but Decode
// for another node refuses it; the signature cannot be moved to a plan
// relabelled for that node (TestSignVerify).
func TestSignedNodeIsBound(t *testing.T) {
	data := encodedPlan(t, "win-2")
	if _, err := trusted(testKey(1)).Verify(data, Sign(data, testKey(1))); err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(data, "win-1"); !errors.Is(err, ErrForeignNode) {
		t.Fatalf("Decode for win-1 of win-2's signed plan: %v, want ErrForeignNode", err)
	}
}

func TestSignerOf(t *testing.T) {
	data := encodedPlan(t, "win-1")
	sig := Sign(data, testKey(1))
	fp, err := SignerOf(data, sig)
	if err != nil || fp != Fingerprint(testKey(1).Public().(ed25519.PublicKey)) {
		t.Fatalf("SignerOf = %q, %v", fp, err)
	}
	if _, err := SignerOf(encodedPlan(t, "win-2"), sig); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a signature of other bytes: %v, want ErrBadSignature", err)
	}
}

func TestSignatureFile(t *testing.T) {
	for in, want := range map[string]string{"win-1.json": "win-1.json.sig", "plan.json": "plan.json.sig", `C:\p\win-1.json`: `C:\p\win-1.json.sig`} {
		if got := SignatureFile(in); got != want {
			t.Errorf("SignatureFile(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzVerify(f *testing.F) {
	data := []byte(`{"node":"win-1"}`)
	f.Add(Sign(data, testKey(1)))
	f.Add([]byte(armorBegin + "\n" + armorEnd))
	ring := trusted(testKey(1))
	f.Fuzz(func(t *testing.T, sig []byte) {
		k, err := ring.Verify(data, sig)
		if err == nil && !bytes.Equal(k.Key, ring[0].Key) {
			t.Fatalf("accepted by a key not in the ring")
		}
	})
}
