// Package rollout coordinates the disruptive changes of many nodes: a
// network replace (cordon, drain, recreate, uncordon) takes a rollout slot
// first, and at most windows.rollout.maxUnavailable nodes hold one at a
// time, cluster-wide.
//
// A slot is a coordination.k8s.io Lease in the agents' namespace, named
// hnsplan-rollout-<i> for i below the budget; its holderIdentity is the
// node. The holder renews it while it holds it and deletes it when it
// releases it. Slot names being unique is what bounds the rollout: two
// nodes racing for one name cannot both create it, and a takeover is an
// update at the resourceVersion the taker saw, so two takers cannot both
// succeed either.
//
// A slot whose holder stops renewing it is taken over only after the
// Lease has expired by the taker's own clock: the taker times how long it
// has seen the Lease unchanged (as client-go's leader election does),
// never trusting renewTime, which another node's clock wrote. A new agent
// therefore waits a whole lease duration before it takes over any slot.
//
// A node that ends a replace blocked or in error keeps its slot, renewing
// it: that halts the rollout, as a DaemonSet's rolling update stops on a
// pod that does not become ready, until an operator acts (Free, which is
// `hnsplan rollout resume`).
package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// Lease names and labels.
const (
	// NamePrefix starts every slot's Lease name; the slot's index follows.
	NamePrefix = "hnsplan-rollout-"
	// SlotLabel marks a slot's Lease; its value is the slot's index.
	SlotLabel = "hnsplan.io/rollout-slot"
	// DefaultDuration is how long a slot outlives its holder's last renewal.
	DefaultDuration = 60 * time.Second
	// MaxDuration bounds a Lease's duration as read, and the one an agent
	// may write (the lease-policy refuses more): a Lease written with a
	// huge duration must not hold the rollout for longer than 5 minutes
	// between renewals.
	MaxDuration = 5 * time.Minute
	// SquatAfter is how long a slot held by a name that is no Windows node
	// (Slots.Windows) must stay unrenewed, as the taker saw it, before it
	// is taken over, whatever its duration: no agent will ever renew it.
	SquatAfter = time.Minute
)

// ErrLost says the holder's slot is gone: an operator freed it (rollout
// resume) or another node took it over after it expired.
var ErrLost = errors.New("the rollout slot is no longer held by this node")

// Slots is one node's hand on the rollout slots. Its methods are not safe
// for concurrent use: the agent's replace path is the only caller.
type Slots struct {
	Leases    typedcoordinationv1.LeasesGetter
	Namespace string
	Holder    string // the node's name
	// Max is how many slots may be held at once (MaxUnavailable).
	Max int
	// Duration is the Lease duration written; DefaultDuration when zero.
	Duration time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Windows, if set, are the cluster's Windows nodes, by name: a slot
	// held by another name is taken over once unrenewed for SquatAfter.
	// Nil: every holder is taken for a node.
	Windows map[string]bool
	// Stranded are the nodes disrupted by hnsplan outside the slots
	// (kube.Stranded: cordoned by the agent, not let go of): each that
	// holds no live slot counts against Max as a slot would.
	Stranded []string

	// Extra are the slots beyond its one that this node found held in its
	// name and gave up (mine), for the caller to report; it may clear it.
	Extra []string

	held     string                 // the Lease this node holds, once known
	observed map[string]observation // each Lease as this node last saw it
}

// An observation is a Lease's version and when this node first saw it.
type observation struct {
	version string
	since   time.Time
}

// Slot describes one Lease, as Status lists them.
type Slot struct {
	Name     string
	Holder   string
	Acquired time.Time
	Renewed  time.Time
	Duration time.Duration

	version string // the Lease's resourceVersion, for Free's precondition
}

func (s *Slots) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Slots) duration() time.Duration {
	if s.Duration > 0 {
		return min(s.Duration, MaxDuration)
	}
	return DefaultDuration
}

// Acquire returns the slot this node holds, taking a free or expired one if
// it holds none. ok is false, with no error, when every slot is taken: the
// caller waits and tries again (a pass later). A slot this node already
// holds — after a restart in the middle of a replace, say — is returned as
// it is and renewed.
func (s *Slots) Acquire(ctx context.Context) (name string, ok bool, err error) {
	if s.Max < 1 {
		return "", false, fmt.Errorf("rollout: Max is %d; it must be at least 1", s.Max)
	}
	list, err := s.Leases.Leases(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: SlotLabel})
	if err != nil {
		return "", false, fmt.Errorf("rollout: list the slot Leases in %s: %w", s.Namespace, err)
	}
	now := s.now()
	s.observe(list.Items, now)
	if l := s.mine(ctx, list.Items); l != nil {
		s.held = l.Name
		return l.Name, true, s.renew(ctx, l)
	}
	active, taken, live := 0, map[string]*coordinationv1.Lease{}, map[string]bool{}
	var expired []*coordinationv1.Lease
	for i := range list.Items {
		l := &list.Items[i]
		if !strings.HasPrefix(l.Name, NamePrefix) {
			continue
		}
		taken[l.Name] = l
		switch {
		case holder(l) == "" || s.expired(l, now):
			expired = append(expired, l)
		default:
			active++
			live[holder(l)] = true
		}
	}
	if active+s.outside(live) >= s.Max {
		return "", false, nil
	}
	for i := range s.Max {
		name := NamePrefix + strconv.Itoa(i)
		if l, ok := taken[name]; ok {
			if !slices.Contains(expired, l) {
				continue
			}
			if err := s.takeOver(ctx, l, now); err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					continue // another node was quicker, or freed it: not ours
				}
				return "", false, err
			}
			s.held = name
			return name, true, nil
		}
		if err := s.create(ctx, name, i, now); err != nil {
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			return "", false, err
		}
		s.held = name
		return name, true, nil
	}
	return "", false, nil
}

// mine returns the slot Lease this node holds, if any. A node holds one
// slot: the agent never takes a second, but another writer with the
// node's identity (its token) could make one, which would let one node
// count for two against maxUnavailable's others. So of several, it keeps
// the one it knows it holds (else the first by name) and gives the others
// up, each deleted at the version read (one taken over meanwhile is left
// alone); Extra lists them.
func (s *Slots) mine(ctx context.Context, leases []coordinationv1.Lease) *coordinationv1.Lease {
	var held []*coordinationv1.Lease
	for i := range leases {
		if l := &leases[i]; strings.HasPrefix(l.Name, NamePrefix) && holder(l) == s.Holder {
			held = append(held, l)
		}
	}
	if len(held) == 0 {
		return nil
	}
	slices.SortFunc(held, func(a, b *coordinationv1.Lease) int { return strings.Compare(a.Name, b.Name) })
	keep := held[0]
	for _, l := range held {
		if l.Name == s.held {
			keep = l
		}
	}
	for _, l := range held {
		if l == keep {
			continue
		}
		err := s.Leases.Leases(s.Namespace).Delete(ctx, l.Name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
		if err == nil {
			s.Extra = append(s.Extra, l.Name)
		}
		// Any error leaves it: it is given up again on the next pass.
	}
	return keep
}

// Hold renews the slot this node holds and returns it, as Acquire does,
// but never takes one: ok is false when the node holds none (an operator
// freed it, or another node took it over after it expired). A node that
// knows it held a slot calls Hold, not Acquire, so that a slot freed
// between its last look and this call is lost, not taken again as new.
func (s *Slots) Hold(ctx context.Context) (name string, ok bool, err error) {
	list, err := s.Leases.Leases(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: SlotLabel})
	if err != nil {
		return "", false, fmt.Errorf("rollout: list the slot Leases in %s: %w", s.Namespace, err)
	}
	s.observe(list.Items, s.now())
	l := s.mine(ctx, list.Items)
	if l == nil {
		s.held = ""
		return "", false, nil
	}
	s.held = l.Name
	return l.Name, true, s.renew(ctx, l)
}

// outside counts the stranded nodes other than this one that hold no live
// slot: disrupted all the same.
func (s *Slots) outside(live map[string]bool) int {
	n := 0
	for _, node := range s.Stranded {
		if node != s.Holder && !live[node] {
			n++
		}
	}
	return n
}

// observe records when each Lease was first seen at its current version.
func (s *Slots) observe(leases []coordinationv1.Lease, now time.Time) {
	seen := map[string]observation{}
	for _, l := range leases {
		o, ok := s.observed[l.Name]
		if !ok || o.version != l.ResourceVersion {
			o = observation{l.ResourceVersion, now}
		}
		seen[l.Name] = o
	}
	s.observed = seen
}

// expired reports whether l has gone unrenewed, as this node has watched
// it, for longer than its duration.
func (s *Slots) expired(l *coordinationv1.Lease, now time.Time) bool {
	o, ok := s.observed[l.Name]
	d := leaseDuration(l)
	if s.Windows != nil && !s.Windows[holder(l)] {
		d = min(d, SquatAfter)
	}
	return ok && o.version == l.ResourceVersion && now.Sub(o.since) > d
}

func leaseDuration(l *coordinationv1.Lease) time.Duration {
	d := DefaultDuration
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		d = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	return min(d, MaxDuration)
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (s *Slots) create(ctx context.Context, name string, index int, now time.Time) error {
	t := metav1.NewMicroTime(now)
	secs := int32(s.duration() / time.Second)
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace, Labels: map[string]string{
			SlotLabel:                      strconv.Itoa(index),
			"app.kubernetes.io/managed-by": "hnsplan-agent",
		}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &s.Holder, LeaseDurationSeconds: &secs,
			AcquireTime: &t, RenewTime: &t},
	}
	if _, err := s.Leases.Leases(s.Namespace).Create(ctx, l, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("rollout: create slot %s/%s: %w", s.Namespace, name, err)
	}
	return nil
}

// takeOver updates an expired or released Lease to this node, at the
// version it was seen: a renewal or another taker in between makes it a
// conflict.
func (s *Slots) takeOver(ctx context.Context, l *coordinationv1.Lease, now time.Time) error {
	l = l.DeepCopy()
	t := metav1.NewMicroTime(now)
	secs := int32(s.duration() / time.Second)
	transitions := int32(1)
	if l.Spec.LeaseTransitions != nil {
		transitions = *l.Spec.LeaseTransitions + 1
	}
	l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = &s.Holder, &secs
	l.Spec.AcquireTime, l.Spec.RenewTime, l.Spec.LeaseTransitions = &t, &t, &transitions
	_, err := s.Leases.Leases(s.Namespace).Update(ctx, l, metav1.UpdateOptions{})
	return err
}

func (s *Slots) renew(ctx context.Context, l *coordinationv1.Lease) error {
	l = l.DeepCopy()
	t := metav1.NewMicroTime(s.now())
	secs := int32(s.duration() / time.Second)
	l.Spec.RenewTime, l.Spec.LeaseDurationSeconds = &t, &secs
	if _, err := s.Leases.Leases(s.Namespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("rollout: renew slot %s/%s: %w", s.Namespace, l.Name, err)
	}
	return nil
}

// Renew renews the slot this node holds. ErrLost says it holds none any
// more; Acquire learns a slot held from before a restart.
func (s *Slots) Renew(ctx context.Context) error {
	if s.held == "" {
		return ErrLost
	}
	l, err := s.Leases.Leases(s.Namespace).Get(ctx, s.held, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.held = ""
		return ErrLost
	}
	if err != nil {
		return fmt.Errorf("rollout: read slot %s/%s: %w", s.Namespace, s.held, err)
	}
	if holder(l) != s.Holder {
		s.held = ""
		return ErrLost
	}
	return s.renew(ctx, l)
}

// Keep renews the held slot every third of its duration until ctx ends or
// the slot is lost (ErrLost). Renewal errors other than a loss are retried
// at the next tick: the slot expires only after a whole duration.
func (s *Slots) Keep(ctx context.Context) error {
	tick := time.NewTicker(s.duration() / 3)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if err := s.Renew(ctx); errors.Is(err, ErrLost) {
				return err
			}
		}
	}
}

// Release gives the held slot up by deleting its Lease, at the version it
// reads, so that a slot another node took over in between is left alone.
// Releasing nothing is not an error.
func (s *Slots) Release(ctx context.Context) error {
	if s.held == "" {
		return nil
	}
	name := s.held
	l, err := s.Leases.Leases(s.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.held = ""
		return nil
	}
	if err != nil {
		return fmt.Errorf("rollout: read slot %s/%s: %w", s.Namespace, name, err)
	}
	if holder(l) != s.Holder {
		s.held = ""
		return nil
	}
	err = s.Leases.Leases(s.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("rollout: release slot %s/%s: %w", s.Namespace, name, err)
	}
	s.held = ""
	return nil
}

// Held is the name of the slot this node holds, as last seen; "" for none.
func (s *Slots) Held() string { return s.held }

// Status lists the slot Leases of namespace, by name.
func Status(ctx context.Context, leases typedcoordinationv1.LeasesGetter, namespace string) ([]Slot, error) {
	list, err := leases.Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: SlotLabel})
	if err != nil {
		return nil, fmt.Errorf("rollout: list the slot Leases in %s: %w", namespace, err)
	}
	var out []Slot
	for _, l := range list.Items {
		if !strings.HasPrefix(l.Name, NamePrefix) {
			continue
		}
		sl := Slot{Name: l.Name, Holder: holder(&l), Duration: leaseDuration(&l), version: l.ResourceVersion}
		if t := l.Spec.AcquireTime; t != nil {
			sl.Acquired = t.Time
		}
		if t := l.Spec.RenewTime; t != nil {
			sl.Renewed = t.Time
		}
		out = append(out, sl)
	}
	slices.SortFunc(out, func(a, b Slot) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// Free deletes the slot Leases held by node, so that a rollout halted on it
// goes on without it: `hnsplan rollout resume`. It returns the slots freed.
// The node's agent, finding its slot gone, does not take another for the
// same change until its state changes (an operator's --retry).
func Free(ctx context.Context, leases typedcoordinationv1.LeasesGetter, namespace, node string) ([]string, error) {
	slots, err := Status(ctx, leases, namespace)
	if err != nil {
		return nil, err
	}
	var freed []string
	for _, sl := range slots {
		if sl.Holder != node {
			continue
		}
		ok, err := freeSlot(ctx, leases, namespace, node, sl.Name, sl.version)
		if err != nil {
			return freed, fmt.Errorf("rollout: free slot %s/%s of %s: %w", namespace, sl.Name, node, err)
		}
		if ok {
			freed = append(freed, sl.Name)
		}
	}
	return freed, nil
}

// freeSlot deletes the slot Lease name while node holds it. Each delete is
// at the version read, so a slot taken over in between is left to its new
// holder; a conflict because node renewed it (a blocked node keeps
// renewing) reads it again and retries, or the operator's resume would
// free nothing, silently.
func freeSlot(ctx context.Context, leases typedcoordinationv1.LeasesGetter, namespace, node, name, version string) (bool, error) {
	for range 5 {
		err := leases.Leases(namespace).Delete(ctx, name, metav1.DeleteOptions{
			Preconditions: &metav1.Preconditions{ResourceVersion: &version}})
		switch {
		case err == nil:
			return true, nil
		case apierrors.IsNotFound(err):
			return false, nil
		case !apierrors.IsConflict(err):
			return false, err
		}
		l, err := leases.Leases(namespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, nil
		case err != nil:
			return false, err
		case holder(l) != node:
			return false, nil // taken over: not node's any more
		}
		version = l.ResourceVersion
	}
	return false, fmt.Errorf("slot %s changed at every attempt to free it: try again", name)
}
