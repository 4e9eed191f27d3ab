package intent

import "testing"

func TestCatalogLoads(t *testing.T) {
	rules, err := Catalog()
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) == 0 {
		t.Fatal("empty catalog")
	}
	for i, r := range rules {
		if r.ID == "" || r.Severity == "" || r.Summary == "" || r.Remedy == "" || r.Phase == "" || r.Family == "" {
			t.Errorf("incomplete rule %+v", r)
		}
		if i > 0 && rules[i-1].ID >= r.ID {
			t.Errorf("catalog not sorted at %s", r.ID)
		}
	}
}
