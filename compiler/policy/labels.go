package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// labelSelector writes a Kubernetes LabelSelector as a Calico selector with
// the same meaning: matchLabels and matchExpressions ANDed; NotIn and
// DoesNotExist match when the label is absent, as in both. An empty
// selector is all().
func labelSelector(s *metav1.LabelSelector) (string, error) {
	if s == nil {
		return "all()", nil
	}
	var terms []string
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		terms = append(terms, fmt.Sprintf("%s == %s", k, strconv.Quote(s.MatchLabels[k])))
	}
	for _, e := range s.MatchExpressions {
		vals := slices.Clone(e.Values)
		slices.Sort(vals)
		quoted := make([]string, len(vals))
		for i, v := range vals {
			quoted[i] = strconv.Quote(v)
		}
		set := "{" + strings.Join(quoted, ", ") + "}"
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if len(vals) == 0 {
				return "", fmt.Errorf("matchExpressions: In on %q needs values", e.Key)
			}
			terms = append(terms, fmt.Sprintf("%s in %s", e.Key, set))
		case metav1.LabelSelectorOpNotIn:
			if len(vals) == 0 {
				return "", fmt.Errorf("matchExpressions: NotIn on %q needs values", e.Key)
			}
			terms = append(terms, fmt.Sprintf("%s not in %s", e.Key, set))
		case metav1.LabelSelectorOpExists:
			terms = append(terms, fmt.Sprintf("has(%s)", e.Key))
		case metav1.LabelSelectorOpDoesNotExist:
			terms = append(terms, fmt.Sprintf("!has(%s)", e.Key))
		default:
			return "", fmt.Errorf("matchExpressions: unknown operator %q", e.Operator)
		}
	}
	if len(terms) == 0 {
		return "all()", nil
	}
	return strings.Join(terms, " && "), nil
}

// and combines selectors; all() drops out.
func and(sels ...string) string {
	var parts []string
	for _, s := range sels {
		if s == "" || s == "all()" {
			continue
		}
		parts = append(parts, "("+s+")")
	}
	switch len(parts) {
	case 0:
		return "all()"
	case 1:
		return strings.TrimSuffix(strings.TrimPrefix(parts[0], "("), ")")
	}
	return strings.Join(parts, " && ")
}
