//go:build integration

// Slot semantics against a real kube-apiserver and etcd (make
// test-integration): the uniqueness of Lease names and resourceVersion
// conflicts are the API server's, so only a real one tests them. Time is
// each node's own clock (Slots.Now), so the expiry tests step it instead of
// sleeping.

package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/hnsplan/hnsplan/internal/kubetest"
)

// clock is a node's clock, stepped by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) step(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is one namespace of a real API server for one test.
type env struct {
	cs kubernetes.Interface
	ns string
}

func newEnv(t *testing.T) env {
	t.Helper()
	cs := kubetest.Client(t, kubetest.Config(t))
	ns := kubetest.UniqueName("rollout")
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	return env{cs, ns}
}

func (e env) node(name string, max int, c *clock) *Slots {
	return &Slots{Leases: e.cs.CoordinationV1(), Namespace: e.ns, Holder: name, Max: max,
		Duration: 10 * time.Second, Now: c.Now}
}

func acquire(t *testing.T, s *Slots) (string, bool) {
	t.Helper()
	name, ok, err := s.Acquire(context.Background())
	if err != nil {
		t.Fatalf("%s: Acquire: %v", s.Holder, err)
	}
	return name, ok
}

func TestSlotsBoundTheRollout(t *testing.T) {
	e := newEnv(t)
	c := &clock{t: time.Unix(1e9, 0)}
	a, b, d := e.node("win-a", 2, c), e.node("win-b", 2, c), e.node("win-c", 2, c)
	if _, ok := acquire(t, a); !ok {
		t.Fatal("win-a: no slot of two free")
	}
	if _, ok := acquire(t, b); !ok {
		t.Fatal("win-b: no slot, one of two free")
	}
	if name, ok := acquire(t, d); ok {
		t.Fatalf("win-c took %s while both slots are held", name)
	}
	// Holding is idempotent: a second Acquire is the same slot.
	first, _ := acquire(t, a)
	if again, _ := acquire(t, a); again != first {
		t.Fatalf("win-a: Acquire again gave %s, then %s", first, again)
	}
	if err := a.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := acquire(t, d); !ok {
		t.Fatal("win-c: no slot after win-a released one")
	}
	// A smaller budget (a plan that lowered maxUnavailable) counts the slots
	// held above it: nobody starts until held ones are released.
	late := e.node("win-d", 1, c)
	if name, ok := acquire(t, late); ok {
		t.Fatalf("win-d with a budget of 1 took %s while two are held", name)
	}
}

// TestSlotsRace: eight nodes ask for one slot at once; the API server lets
// exactly one have it.
func TestSlotsRace(t *testing.T) {
	e := newEnv(t)
	c := &clock{t: time.Unix(1e9, 0)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	for i := range 8 {
		s := e.node(fmt.Sprintf("win-%d", i), 1, c)
		wg.Go(func() {
			if _, ok := acquire(t, s); ok {
				mu.Lock()
				winners = append(winners, s.Holder)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d nodes hold the one slot: %v", len(winners), winners)
	}
}

// TestDeadHolderTakenOverAfterExpiry: a holder that stops renewing (its
// agent died) keeps its slot for the Lease's duration as the taker
// measures it, from when the taker first saw the Lease, and not a moment
// less; then the slot changes hands once and the dead holder has lost it.
func TestDeadHolderTakenOverAfterExpiry(t *testing.T) {
	e := newEnv(t)
	ca, cb := &clock{t: time.Unix(1e9, 0)}, &clock{t: time.Unix(5e9, 0)} // skewed clocks
	a, b := e.node("win-a", 1, ca), e.node("win-b", 1, cb)
	held, ok := acquire(t, a)
	if !ok {
		t.Fatal("win-a: no slot")
	}
	// win-a renews once, then dies: no release.
	if err := a.Renew(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, after := range []time.Duration{0, 5 * time.Second, 10 * time.Second} {
		cb.step(after - (cb.Now().Sub(time.Unix(5e9, 0))))
		if name, ok := acquire(t, b); ok {
			t.Fatalf("win-b took %s %v after first seeing it, before the 10s Lease expired", name, after)
		}
	}
	cb.step(time.Second + time.Millisecond)
	name, ok := acquire(t, b)
	if !ok || name != held {
		t.Fatalf("win-b after expiry: slot %q, %v; want %s", name, ok, held)
	}
	l, err := e.cs.CoordinationV1().Leases(e.ns).Get(context.Background(), held, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder(l) != "win-b" || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 1 {
		t.Fatalf("after takeover: holder %q, transitions %v", holder(l), l.Spec.LeaseTransitions)
	}
	if err := a.Renew(context.Background()); !errors.Is(err, ErrLost) {
		t.Fatalf("win-a's renewal after the takeover: %v, want ErrLost", err)
	}
}

// TestRenewalKeepsTheSlot: a holder that renews is never taken over, however
// long the others wait.
func TestRenewalKeepsTheSlot(t *testing.T) {
	e := newEnv(t)
	ca, cb := &clock{t: time.Unix(1e9, 0)}, &clock{t: time.Unix(1e9, 0)}
	a, b := e.node("win-a", 1, ca), e.node("win-b", 1, cb)
	if _, ok := acquire(t, a); !ok {
		t.Fatal("win-a: no slot")
	}
	for range 5 {
		ca.step(8 * time.Second) // a renewal writes a new renewTime
		cb.step(8 * time.Second)
		if name, ok := acquire(t, b); ok {
			t.Fatalf("win-b took %s from a holder that renews", name)
		}
		if err := a.Renew(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRestartKeepsTheSlot: an agent restarted in the middle of a replace
// finds the slot it holds; a freed slot (rollout resume) is lost to it and
// free for the next node at once.
func TestRestartKeepsTheSlot(t *testing.T) {
	e := newEnv(t)
	c := &clock{t: time.Unix(1e9, 0)}
	held, ok := acquire(t, e.node("win-a", 1, c))
	if !ok {
		t.Fatal("win-a: no slot")
	}
	restarted := e.node("win-a", 1, c)
	if name, ok := acquire(t, restarted); !ok || name != held {
		t.Fatalf("win-a after a restart: %q, %v; want %s", name, ok, held)
	}
	freed, err := Free(context.Background(), e.cs.CoordinationV1(), e.ns, "win-a")
	if err != nil || len(freed) != 1 || freed[0] != held {
		t.Fatalf("Free(win-a) = %v, %v", freed, err)
	}
	if err := restarted.Renew(context.Background()); !errors.Is(err, ErrLost) {
		t.Fatalf("renewal of a freed slot: %v, want ErrLost", err)
	}
	if _, ok := acquire(t, e.node("win-b", 1, c)); !ok {
		t.Fatal("win-b: no slot after win-a's was freed")
	}
	slots, err := Status(context.Background(), e.cs.CoordinationV1(), e.ns)
	if err != nil || len(slots) != 1 || slots[0].Holder != "win-b" {
		t.Fatalf("Status = %+v, %v", slots, err)
	}
}

// renewFirst is a LeasesGetter whose first Delete is preceded by the
// holder's renewal: an operator's resume racing a blocked node that keeps
// renewing its slot.
type renewFirst struct {
	typedcoordinationv1.LeasesGetter
	renew func()
	once  sync.Once
}

func (r *renewFirst) Leases(ns string) typedcoordinationv1.LeaseInterface {
	return &renewFirstLeases{LeaseInterface: r.LeasesGetter.Leases(ns), r: r}
}

type renewFirstLeases struct {
	typedcoordinationv1.LeaseInterface
	r *renewFirst
}

func (l *renewFirstLeases) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	l.r.once.Do(l.r.renew)
	return l.LeaseInterface.Delete(ctx, name, opts)
}

// TestFreeWhileTheHolderRenews: a slot renewed between Free's read and its
// delete is still freed (Free reads it again), not silently kept.
func TestFreeWhileTheHolderRenews(t *testing.T) {
	e := newEnv(t)
	c := &clock{t: time.Unix(1e9, 0)}
	a := e.node("win-a", 1, c)
	held, ok := acquire(t, a)
	if !ok {
		t.Fatal("win-a: no slot")
	}
	leases := &renewFirst{LeasesGetter: e.cs.CoordinationV1(), renew: func() {
		c.step(5 * time.Second)
		if err := a.Renew(context.Background()); err != nil {
			t.Errorf("renew: %v", err)
		}
	}}
	freed, err := Free(context.Background(), leases, e.ns, "win-a")
	if err != nil || len(freed) != 1 || freed[0] != held {
		t.Fatalf("Free(win-a) while it renews = %v, %v; want [%s]", freed, err, held)
	}
	if err := a.Renew(context.Background()); !errors.Is(err, ErrLost) {
		t.Fatalf("renewal of a freed slot: %v, want ErrLost", err)
	}
}

// TestSquattedSlot: a slot Lease made by hand for a name that is no
// Windows node, for an hour, reads as 5 minutes (MaxDuration) and is
// taken over by an agent once it has stayed unrenewed for a minute as the
// agent saw it (SquatAfter); a Windows node's Lease of the same duration
// is not.
func TestSquattedSlot(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	hour := int32(3600)
	for i, h := range []string{"intruder", "win-b"} {
		holder := h
		now := metav1.NewMicroTime(time.Now())
		if _, err := e.cs.CoordinationV1().Leases(e.ns).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: NamePrefix + fmt.Sprint(i), Labels: map[string]string{SlotLabel: fmt.Sprint(i)}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &hour, AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	slots, err := Status(ctx, e.cs.CoordinationV1(), e.ns)
	if err != nil || len(slots) != 2 || slots[0].Duration != MaxDuration {
		t.Fatalf("slots %+v, %v; want the hour read as %v", slots, err, MaxDuration)
	}
	c := &clock{t: time.Unix(1e9, 0)}
	a := e.node("win-a", 2, c)
	a.Windows = map[string]bool{"win-a": true, "win-b": true}
	if _, ok := acquire(t, a); ok {
		t.Fatal("win-a took a slot at once: a squatted slot must stay unrenewed for a minute first")
	}
	c.step(SquatAfter + time.Second)
	name, ok := acquire(t, a)
	if !ok || name != NamePrefix+"0" {
		t.Fatalf("win-a after a minute: %q %v; want the intruder's slot %s", name, ok, NamePrefix+"0")
	}
	// win-b's slot, as long unrenewed, is a Windows node's: kept.
	d := e.node("win-d", 2, c)
	d.Windows = a.Windows
	if name, ok := acquire(t, d); ok {
		t.Fatalf("win-d took %s at once", name)
	}
	c.step(SquatAfter + time.Second)
	if err := a.Renew(ctx); err != nil { // win-a is alive
		t.Fatal(err)
	}
	if name, ok := acquire(t, d); ok {
		t.Fatalf("win-d took %s after a minute: a Windows node's slot lasts its duration", name)
	}
}

// TestStrandedCounted: a node cordoned by hnsplan's agent that holds no
// live slot counts against Max: the next node waits, though every slot is
// free; once it is let go of (not stranded), the next node goes on.
func TestStrandedCounted(t *testing.T) {
	e := newEnv(t)
	c := &clock{t: time.Unix(1e9, 0)}
	a := e.node("win-a", 1, c)
	a.Stranded = []string{"win-b", "win-a"} // itself never counts
	if _, ok := acquire(t, a); ok {
		t.Fatal("win-a took a slot while win-b is stranded with maxUnavailable 1")
	}
	a.Max = 2
	if _, ok := acquire(t, a); !ok {
		t.Fatal("win-a: no slot with maxUnavailable 2 and one node stranded")
	}
	b := e.node("win-b", 2, c)
	b.Stranded = []string{"win-c"}
	if _, ok := acquire(t, b); ok {
		t.Fatal("win-b took a slot: win-a holds one and win-c is stranded, with maxUnavailable 2")
	}
	b.Stranded = nil
	if _, ok := acquire(t, b); !ok {
		t.Fatal("win-b: no slot once win-c was let go of")
	}
}

// TestOneSlotPerNode: two slots held in win-a's name (made by another
// writer with its identity): win-a keeps the one it knows it holds and
// gives the other up, so that the next node can take it; a slot of
// another holder is not touched.
func TestOneSlotPerNode(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := &clock{t: time.Unix(1e9, 0)}
	a := e.node("win-a", 3, c)
	name, ok := acquire(t, a)
	if !ok || name != NamePrefix+"0" {
		t.Fatalf("win-a: %q %v", name, ok)
	}
	b := e.node("win-b", 3, c)
	if name, ok := acquire(t, b); !ok || name != NamePrefix+"1" {
		t.Fatalf("win-b: %q %v", name, ok)
	}
	holder, ten := "win-a", int32(10)
	now := metav1.NewMicroTime(c.Now())
	if _, err := e.cs.CoordinationV1().Leases(e.ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: NamePrefix + "2", Labels: map[string]string{SlotLabel: "2"}},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &ten, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := e.node("win-d", 3, c)
	if name, ok := acquire(t, d); ok {
		t.Fatalf("win-d took %s while win-a holds two of the three slots", name)
	}
	if name, ok := acquire(t, a); !ok || name != NamePrefix+"0" || !slices.Equal(a.Extra, []string{NamePrefix + "2"}) {
		t.Fatalf("win-a: %q %v, gave up %v; want %s kept and %s given up", name, ok, a.Extra, NamePrefix+"0", NamePrefix+"2")
	}
	slots, err := Status(ctx, e.cs.CoordinationV1(), e.ns)
	if err != nil || len(slots) != 2 || slots[0].Holder != "win-a" || slots[1].Holder != "win-b" {
		t.Fatalf("slots %+v, %v; want win-a's one and win-b's", slots, err)
	}
	if name, ok := acquire(t, d); !ok || name != NamePrefix+"2" {
		t.Fatalf("win-d: %q %v; want the slot win-a gave up", name, ok)
	}
}
