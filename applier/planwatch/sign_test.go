package planwatch_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/hnsplan/hnsplan/applier/planwatch"
	"github.com/hnsplan/hnsplan/compiler/plan"
)

func signingKey(seed byte) ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize))
}

func ring(keys ...ed25519.PrivateKey) plan.Keyring {
	var r plan.Keyring
	for _, k := range keys {
		r = append(r, plan.TrustedKey{Key: k.Public().(ed25519.PublicKey), Comment: "ci"})
	}
	return r
}

func fp(k ed25519.PrivateKey) string { return plan.Fingerprint(k.Public().(ed25519.PublicKey)) }

// TestFileSigned: with a Trust, the file source delivers only plans whose
// signature file (beside the plan) a trusted key verifies; a change of
// keys makes it read again, so a rotation takes effect without a new plan.
func TestFileSigned(t *testing.T) {
	a, b := signingKey(1), signingKey(2)
	trust := planwatch.NewTrust(ring(a))
	f := fileSource(t)
	f.Trust = trust
	sigPath := plan.SignatureFile(f.Path)
	p1, d1 := encode(t, "win-1", 1)
	p2, d2 := encode(t, "win-1", 2)

	publish(t, sigPath, plan.Sign(p1, a))
	publish(t, f.Path, p1)
	ch := start(t, f)
	u := expect(t, ch, want{digest: d1})
	if !strings.Contains(u.Signer, fp(a)) {
		t.Errorf("Signer = %q, want %s", u.Signer, fp(a))
	}

	// A new plan with the old signature: refused, naming the keys.
	publish(t, f.Path, p2)
	u = expect(t, ch, want{err: plan.ErrBadSignature, msg: "signature " + sigPath})
	if !strings.Contains(u.Err.Error(), fp(a)) {
		t.Errorf("the rejection does not name the trusted key: %v", u.Err)
	}
	// Signed by a key not trusted.
	publish(t, sigPath, plan.Sign(p2, b))
	expect(t, ch, want{err: plan.ErrUntrustedSigner, msg: fp(b)})
	// Rotation: b becomes trusted (beside a); the same files now pass.
	trust.Set(ring(a, b), nil)
	expect(t, ch, want{digest: d2})
	// a is retired and p2 was signed by b: nothing new to send.
	trust.Set(ring(b), nil)
	expectQuiet(t, ch, 300*time.Millisecond)
	// b is retired too: refused; the agent keeps what it applies.
	trust.Set(ring(a), nil)
	expect(t, ch, want{err: plan.ErrUntrustedSigner})
	// Unsigned.
	trust.Set(ring(b), nil)
	expect(t, ch, want{digest: d2})
	if err := os.Remove(sigPath); err != nil {
		t.Fatal(err)
	}
	publish(t, f.Path, p1)
	expect(t, ch, want{err: plan.ErrUnsigned, msg: "no signature in " + sigPath})
	// No keys at all: everything refused, saying why.
	trust.Set(nil, errors.New("the ConfigMap was deleted"))
	expect(t, ch, want{err: plan.ErrNoTrustedKeys, msg: "the ConfigMap was deleted"})
}

// TestFileSignedOtherNode: a plan signed for another node, published here
// with its valid signature, is still another node's plan.
func TestFileSignedOtherNode(t *testing.T) {
	a := signingKey(1)
	f := fileSource(t)
	f.Trust = planwatch.NewTrust(ring(a))
	other, _ := encode(t, "win-2", 1)
	publish(t, plan.SignatureFile(f.Path), plan.Sign(other, a))
	publish(t, f.Path, other)
	expect(t, start(t, f), want{err: plan.ErrForeignNode})
}

func planConfigMap(node string, data, sig []byte) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: planwatch.ConfigMapName(node), Namespace: planwatch.ConfigMapNamespace},
		Data: map[string]string{planwatch.ConfigMapKey: string(data)}}
	if sig != nil {
		cm.Data[planwatch.ConfigMapSignatureKey] = string(sig)
	}
	return cm
}

func authorizedKeys(keys ...ed25519.PrivateKey) string {
	var b strings.Builder
	b.WriteString("# plan signing keys\n")
	for _, k := range keys {
		pub, _ := ssh.NewPublicKey(k.Public())
		b.Write(ssh.MarshalAuthorizedKey(pub))
	}
	return b.String()
}

// TestConfigMapSigned: the ConfigMap source with trusted keys from the
// trusted-keys ConfigMap. Until that ConfigMap exists every plan is
// refused; once it lists the signer, the plan is delivered; a rotation
// there takes effect at once.
func TestConfigMapSigned(t *testing.T) {
	a, b := signingKey(1), signingKey(2)
	p1, d1 := encode(t, "win-1", 1)
	client := fake.NewClientset(planConfigMap("win-1", p1, plan.Sign(p1, a)))
	trust := planwatch.NewTrust(nil)
	trust.Set(nil, errors.New("not read yet"))
	changes := make(chan plan.Keyring, 10)
	tk := &planwatch.TrustedKeys{Client: client, Trust: trust, Resync: -1,
		OnChange: func(r plan.Keyring, _ error) { changes <- r }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tk.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	ch := start(t, &planwatch.ConfigMap{Client: client, Node: "win-1", Trust: trust, Resync: -1})
	expectSkipping(t, ch, want{err: plan.ErrNoTrustedKeys, msg: "configmap hnsplan-system/trusted-keys key authorized_keys does not exist"}, true)

	cms := client.CoreV1().ConfigMaps(planwatch.ConfigMapNamespace)
	keys := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: planwatch.TrustedKeysName, Namespace: planwatch.ConfigMapNamespace},
		Data: map[string]string{planwatch.TrustedKeysKey: authorizedKeys(b)}}
	if _, err := cms.Create(ctx, keys, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, want{err: plan.ErrUntrustedSigner, msg: fp(b)})

	keys.Data[planwatch.TrustedKeysKey] = authorizedKeys(b, a)
	if _, err := cms.Update(ctx, keys, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := expect(t, ch, want{digest: d1})
	if !strings.Contains(u.Signer, fp(a)) {
		t.Errorf("Signer = %q, want %s", u.Signer, fp(a))
	}

	// Unsigned plan in the ConfigMap.
	p2, _ := encode(t, "win-1", 2)
	if _, err := cms.Update(ctx, planConfigMap("win-1", p2, nil), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, want{err: plan.ErrUnsigned, msg: "no signature in its data key plan.json.sig"})

	// A line that is not an ed25519 key: no keys at all, not "the others".
	keys.Data[planwatch.TrustedKeysKey] = authorizedKeys(a) + "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7 x\n"
	if _, err := cms.Update(ctx, keys, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(t, ch, want{err: plan.ErrNoTrustedKeys, msg: "authorized_keys:"})
	if r, _ := trust.Keys(); len(r) != 0 {
		t.Errorf("a bad trusted-keys ConfigMap left keys %v", r)
	}
}
