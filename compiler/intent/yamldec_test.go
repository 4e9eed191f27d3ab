package intent

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

func decodeYAML[T any](t *testing.T, src string, strict bool) (T, diag.List) {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(src), &n); err != nil {
		t.Fatalf("yaml: %v", err)
	}
	var v T
	var errs diag.List
	d := &yamlDecoder{file: "f.yaml", strict: strict, rule: RuleManifest, what: " (document 1)", errs: &errs}
	d.decode(n.Content[0], reflect.ValueOf(&v).Elem(), "")
	return v, errs
}

func findingLines(l diag.List) []string {
	var out []string
	for _, f := range l {
		out = append(out, f.String())
	}
	return out
}

func TestYAMLDecoderErrors(t *testing.T) {
	type obj struct {
		Name   string             `json:"name"`
		Count  int32              `json:"count"`
		Small  uint8              `json:"small"`
		On     bool               `json:"on"`
		Ratio  float64            `json:"ratio"`
		Nets   []netip.Prefix     `json:"nets"`
		Labels map[string]string  `json:"labels"`
		Port   intstr.IntOrString `json:"port"`
		Nested *struct {
			X string `json:"x"`
		} `json:"nested"`
	}
	tests := []struct {
		name, in string
		strict   bool
		want     []string
	}{
		{name: "ok", in: "name: a\ncount: 3\nsmall: 255\non: true\nratio: 1\nnets: [10.0.0.0/8, 10.1.2.3]\nlabels: {a: b}\nport: http\nnested: {x: y}", strict: true},
		{name: "nulls are zero", in: "name: null\nnested: ~", strict: true},
		{name: "unknown field strict", in: "name: a\nnmae: b", strict: true,
			want: []string{`f.yaml:2:1: error[manifest]: nmae: unknown field "nmae" (document 1)`}},
		{name: "unknown field lenient", in: "name: a\nnmae: b"},
		{name: "number for string", in: "name: 80",
			want: []string{`f.yaml:1:7: error[manifest]: name: expected a string, found 80 (quote it: "80") (document 1)`}},
		{name: "every error reported", in: "count: many\non: yes\nsmall: 256\nnets: [10.0.0.1/8, nope]\nlabels: {a: 1}\nnested: [x]", strict: true,
			want: []string{
				`f.yaml:1:8: error[manifest]: count: expected an integer, found "many" (document 1)`,
				`f.yaml:2:5: error[manifest]: on: expected true or false, found "yes" (document 1)`,
				`f.yaml:3:8: error[manifest]: small: 256 is out of range for this field (document 1)`,
				`f.yaml:4:8: error[cidr-host-bits]: nets[0]: 10.0.0.1/8 has host bits set; write 10.0.0.0/8 (document 1)`,
				`f.yaml:4:20: error[manifest]: nets[1]: "nope" is not a CIDR or an IP address (document 1)`,
				`f.yaml:5:13: error[manifest]: labels.a: expected a string, found 1 (quote it: "1") (document 1)`,
				`f.yaml:6:9: error[manifest]: nested: expected an object, found a list (document 1)`,
			}},
		{name: "duplicate key", in: "name: a\nname: b", strict: true,
			want: []string{`f.yaml:2:1: error[manifest]: name: field "name" is given twice (document 1)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errs := decodeYAML[obj](t, tt.in, tt.strict)
			errs.Sort()
			if diff := cmp.Diff(tt.want, findingLines(errs)); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

func TestYAMLDecoderValues(t *testing.T) {
	in := `
metadata: {name: web, namespace: x, labels: {app: web}}
spec:
  nodeName: win-1
  containers:
  - name: c
    ports: [{name: http, containerPort: 80}]
    resources: {limits: {memory: 1Gi}}
  anchor: &a {x: 1}
`
	pod, errs := decodeYAML[corev1.Pod](t, in, false)
	if len(errs) != 0 {
		t.Fatalf("findings: %v", errs)
	}
	if pod.Name != "web" || pod.Namespace != "x" || pod.Labels["app"] != "web" || pod.Spec.NodeName != "win-1" {
		t.Errorf("metadata/spec not decoded: %+v", pod.ObjectMeta)
	}
	if p := pod.Spec.Containers[0].Ports[0]; p.Name != "http" || p.ContainerPort != 80 {
		t.Errorf("port = %+v", p)
	}
	if q := pod.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("memory limit = %v, want 1Gi", q.String())
	}
	if _, errs := decodeYAML[corev1.Pod](t, in, true); len(errs) != 1 || !strings.Contains(errs[0].Message, `unknown field "anchor"`) {
		t.Errorf("strict decode: want one unknown-field finding, got %v", findingLines(errs))
	}
}

func TestPortAndProtocol(t *testing.T) {
	ports := []struct {
		in      string
		want    Port
		wantErr string
	}{
		{in: `80`, want: Port{Min: 80, Max: 80}},
		{in: `"8080"`, want: Port{Min: 8080, Max: 8080}},
		{in: `"8000:8080"`, want: Port{Min: 8000, Max: 8080}},
		{in: `"http-alt"`, want: Port{Name: "http-alt"}},
		{in: `"90:80"`, wantErr: "must be"},
		{in: `70000`, wantErr: "out of range"},
		{in: `"a very long port name"`, wantErr: "not a valid name"},
		{in: `true`, wantErr: "must be a number"},
	}
	for _, tt := range ports {
		var p Port
		err := p.UnmarshalJSON([]byte(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Port %s: err %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || p != tt.want {
			t.Errorf("Port %s = %+v, %v; want %+v", tt.in, p, err, tt.want)
		}
		b, _ := p.MarshalJSON()
		var back Port
		if err := back.UnmarshalJSON(b); err != nil || back != p {
			t.Errorf("Port %s round trip: %s -> %+v, %v", tt.in, b, back, err)
		}
	}
	protos := []struct {
		in      string
		want    Protocol
		wantErr bool
	}{
		{in: `"TCP"`, want: Protocol{Name: "TCP"}},
		{in: `6`, want: Protocol{Num: 6}},
		{in: `0`, wantErr: true},
		{in: `256`, wantErr: true},
		{in: `""`, wantErr: true},
	}
	for _, tt := range protos {
		var p Protocol
		err := p.UnmarshalJSON([]byte(tt.in))
		if (err != nil) != tt.wantErr || !tt.wantErr && p != tt.want {
			t.Errorf("Protocol %s = %+v, %v", tt.in, p, err)
		}
	}
}
