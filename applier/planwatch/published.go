package planwatch

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Published is the ConfigMaps of ConfigMapNamespace, listed once, from
// which Read verifies any node's plan as a ConfigMap source verifies its
// own on each change: for a one-shot reader of what the agents are given
// (hnsplan diff --live).
type Published struct {
	plans cache.Store
	parts storeParts
}

// NewPublished holds cms, ConfigMaps of ConfigMapNamespace. As a source's
// part informer does, only those labelled PartLabel are parts, and of
// them only the part's data keys are kept.
func NewPublished(cms []*corev1.ConfigMap) (*Published, error) {
	p := &Published{plans: cache.NewStore(cache.MetaNamespaceKeyFunc), parts: storeParts{cache.NewStore(cache.MetaNamespaceKeyFunc)}}
	for _, cm := range cms {
		if err := p.plans.Add(cm); err != nil {
			return nil, err
		}
		if _, ok := cm.Labels[PartLabel]; !ok {
			continue
		}
		part, err := trimPart(cm)
		if err != nil {
			return nil, err
		}
		if err := p.parts.store.Add(part); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Read verifies node's plan, ConfigMapName(node), as the agent on node
// with trust does (ConfigMap.Run): its signature, the plan (format, node,
// digest), the parts it names at the digests it names, and its meaning.
// The Update holds the assembled plan, or Err saying why the agent would
// refuse it (ErrAbsent when there is no such ConfigMap).
func (p *Published) Read(ctx context.Context, node string, trust *Trust) Update {
	key := ConfigMapNamespace + "/" + ConfigMapName(node)
	updates := make(chan Update, 1)
	c := &ConfigMap{Node: node, Trust: trust}
	e := c.emitter(key, updates)
	if err := c.look(ctx, e, p.plans, key, p.parts); err != nil {
		return Update{Source: e.source, Err: &Error{Source: e.source, Msg: err.Error(), Err: err}}
	}
	select {
	case u := <-updates:
		return u
	default: // a fresh emitter sends every first look: not reached
		return Update{Source: e.source, Err: &Error{Source: e.source, Msg: "nothing was read", Err: ErrAbsent}}
	}
}
