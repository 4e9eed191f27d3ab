package kube

import (
	"context"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// blockAffinityLW lists and watches BlockAffinities, and turns "the CRD is
// not installed" (404 from the resource) into an empty list and an idle
// watch. Without it the reflector would retry the failing list forever,
// logging each failure, and the informer would never report synced, so an
// agent on a cluster without Calico IPAM would never start.
//
// While the CRD is missing, each watch idles for recheck and then ends; the
// reflector's next watch call looks again and, once the CRD is served,
// returns an "expired" error so the reflector relists from scratch.
type blockAffinityLW struct {
	res     dynamic.NamespaceableResourceInterface
	recheck time.Duration
	missing atomic.Bool
}

var (
	_ cache.ListerWatcherWithContext = (*blockAffinityLW)(nil)
	_ cache.ListerWatcher            = (*blockAffinityLW)(nil)
)

// IsWatchListSemanticsUnSupported tells the reflector to list, then watch:
// the idle watch cannot produce the bookmark a streaming list ends with.
func (lw *blockAffinityLW) IsWatchListSemanticsUnSupported() bool { return true }

// setMissing records whether the CRD is served, logging only transitions so
// a cluster without Calico gets one line, not one per retry.
func (lw *blockAffinityLW) setMissing(missing bool) {
	if lw.missing.Swap(missing) == missing {
		return
	}
	if missing {
		klog.InfoS("Calico BlockAffinity CRD is not installed; treating block affinities as empty",
			"resource", BlockAffinityResource.String(), "recheck", lw.recheck)
	} else {
		klog.InfoS("Calico BlockAffinity CRD is served", "resource", BlockAffinityResource.String())
	}
}

func (lw *blockAffinityLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	l, err := lw.res.List(ctx, opts)
	if apierrors.IsNotFound(err) {
		lw.setMissing(true)
		empty := &unstructured.UnstructuredList{Object: map[string]any{
			"apiVersion": BlockAffinityResource.GroupVersion().String(),
			"kind":       "BlockAffinityList",
		}}
		return empty, nil
	}
	if err == nil {
		lw.setMissing(false)
	}
	return l, err
}

func (lw *blockAffinityLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if lw.missing.Load() {
		_, err := lw.res.List(ctx, metav1.ListOptions{Limit: 1})
		switch {
		case apierrors.IsNotFound(err):
			return idleWatch(ctx, lw.recheck), nil
		case err != nil:
			return nil, err
		}
		// Installed since the last list: make the reflector relist.
		return nil, apierrors.NewResourceExpired("BlockAffinity CRD appeared; relist")
	}
	w, err := lw.res.Watch(ctx, opts)
	if apierrors.IsNotFound(err) {
		// Removed since the last list; expired makes the reflector relist,
		// which sees the 404 and empties the store.
		return nil, apierrors.NewResourceExpired("BlockAffinity CRD disappeared; relist")
	}
	return w, err
}

func (lw *blockAffinityLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

func (lw *blockAffinityLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// idleWatch returns a watch that delivers nothing and ends after d or when
// ctx is done.
func idleWatch(ctx context.Context, d time.Duration) watch.Interface {
	fw := watch.NewFake()
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		fw.Stop()
	}()
	return fw
}
