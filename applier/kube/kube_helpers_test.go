package kube

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

type (
	fieldsSet  = fields.Set
	watchIface = watch.Interface
)

func cacheTombstone(obj any) any {
	return cache.DeletedFinalStateUnknown{Key: "x", Obj: obj}
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }
