package intent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/hnsplan/hnsplan/compiler/diag"
)

// intentKinds are the manifest kinds an intent directory may hold.
const intentKinds = "networking.k8s.io/v1 NetworkPolicy; projectcalico.org/v3 NetworkPolicy, GlobalNetworkPolicy, Tier, HostEndpoint, IPPool, IPAMConfiguration, FelixConfiguration, BGPConfiguration; operator.tigera.io/v1 Installation; v1 Namespace, Service (or a v1 List of them)"

// inventoryKinds are live state: they belong in --inventory files.
var inventoryKinds = map[string]bool{"Pod": true, "Node": true, "EndpointSlice": true, "BlockAffinity": true}

// skipDir reports whether a directory below the intent is not intent:
// hidden directories (.git, .github) and CUE's module directory.
func skipDir(name string) bool {
	return strings.HasPrefix(name, ".") || name == "cue.mod"
}

// loadManifests reads every *.yaml and *.yml file below dir, in lexical order.
// Each is read through files: a regular file inside dir, of at most the
// size limit.
func loadManifests(dir string, files *inputFiles, m *Manifests, errs *diag.List) {
	rel := files.rel
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			errs.Errorf(RuleManifest, diag.Pos{File: rel(path)}, "", "%s", unlistable(err))
			return nil
		}
		if d.IsDir() {
			if path != dir && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		data, err := files.read(path)
		var ie *InputError
		if errors.As(err, &ie) {
			errs.Errorf(RuleManifest, diag.Pos{File: rel(path)}, "", "%s", ie.Why)
			return nil
		} else if err != nil {
			errs.Errorf(RuleManifest, diag.Pos{File: rel(path)}, "", "%s", unreadable(err))
			return nil
		}
		m.Files++
		file := rel(path)
		// The parser's tree is many times the file: bound it before
		// parsing, each file and the intent's files together.
		if m.values > MaxIntentValues {
			errs.Errorf(RuleManifest, diag.Pos{File: file}, "", "not read: the intent's manifests before it already hold more than %s YAML values, more than hnsplan reads; remove what is not intent, or generated copies", diag.Thousands(MaxIntentValues))
			return nil
		}
		if n, line := indicators(data, MaxFileIndicators); line > 0 {
			errs.Errorf(RuleManifest, diag.Pos{File: file, Line: line}, "", "the file holds more than %s YAML values by line %d, more than hnsplan reads in one intent file (an intent's policies and settings are far smaller); not read: split it, or remove what is not intent", diag.Thousands(MaxFileIndicators), line)
			m.values += n
			return nil
		}
		forEachObjectOf(file, data, RuleManifest, errs, &m.values, func(obj *yaml.Node, src Source, apiVersion, kind string) {
			m.add(obj, src, apiVersion, kind, errs)
		})
		return nil
	})
	if err != nil {
		errs.Errorf(RuleManifest, diag.Pos{File: rel(dir)}, "", "%s", unlistable(err))
	}
}

// unlistable says why a directory of the intent cannot be walked, and
// what to do.
func unlistable(err error) string {
	if errors.Is(err, fs.ErrPermission) {
		return "cannot be listed: permission denied; give the user running hnsplan read and execute permission on the directory (chmod a+rx), or move it out of the intent directory"
	}
	return fmt.Sprintf("cannot be listed: %v; check the directory, or move it out of the intent directory", cause(err))
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// forEachObject calls fn for every Kubernetes object in a multi-document
// YAML (or JSON) file, unpacking v1 Lists. Malformed documents are findings.
func forEachObject(file string, data []byte, rule string, errs *diag.List, fn func(obj *yaml.Node, src Source, apiVersion, kind string)) {
	forEachObjectOf(file, data, rule, errs, nil, fn)
}

// forEachObjectOf is forEachObject counting the values of every document
// (aliases expanded) into *total, if set, and refusing the documents that
// take it past MaxIntentValues: the intent's manifests, across its files.
func forEachObjectOf(file string, data []byte, rule string, errs *diag.List, total *int, fn func(obj *yaml.Node, src Source, apiVersion, kind string)) {
	// The YAML parser says "control characters are not allowed" without
	// a line: find the character first, and say where it is.
	if line, col, what, bad := badChar(data); bad {
		errs.Errorf(rule, diag.Pos{File: file, Line: line, Col: col}, "", "%s: YAML allows only UTF-8 text without control characters (tab, newline and carriage return aside); remove it, or write it as an escape in a double-quoted string", what)
		return
	}
	forEachDocument(file, data, rule, errs, total, fn)
}

// forEachDocument is forEachObjectOf after the character check: each
// document parsed whole.
func forEachDocument(file string, data []byte, rule string, errs *diag.List, total *int, fn func(obj *yaml.Node, src Source, apiVersion, kind string)) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for doc := 1; ; doc++ {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			// A syntax error ends the stream: the decoder cannot resync.
			msg, line := err.Error(), 0
			if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
				line, _ = strconv.Atoi(m[1])
				msg = m[2]
			}
			msg = strings.TrimPrefix(msg, "yaml: ")
			errs.Errorf(rule, diag.Pos{File: file, Line: line}, "", "invalid YAML: %s (document %d)", msg, doc)
			return
		}
		if len(n.Content) == 0 || n.Content[0].Tag == "!!null" {
			continue // an empty document, e.g. after a trailing ---
		}
		root := n.Content[0]
		written, expanded := aliasExpansion(root)
		if expanded > 2*written+maxAliasExpansion {
			// A few aliases of aliases make a small file decode to
			// billions of values: refuse before anything walks it.
			errs.Errorf(rule, nodePos(file, root), "", "the document's YAML aliases expand it past %s values (%s written), more than hnsplan reads: write the values out, or use fewer aliases (document %d)", diag.Thousands(2*written+maxAliasExpansion), diag.Thousands(written), doc)
			continue
		}
		if rule == RuleManifest && expanded > MaxDocumentValues {
			// An inventory (live state) may be larger: the whole run's
			// budget bounds it.
			errs.Errorf(rule, nodePos(file, root), "", "%s", tooManyValues(expanded, doc))
			continue
		}
		if total != nil {
			if *total += expanded; *total > MaxIntentValues {
				errs.Errorf(rule, nodePos(file, root), "", "with this document the intent's manifests hold more than %s YAML values in all (aliases expanded), more than hnsplan reads: an intent's policies and settings are far smaller; remove what is not intent, or generated copies (document %d)", diag.Thousands(MaxIntentValues), doc)
				continue
			}
		}
		src := Source{File: file, Doc: doc, Pos: nodePos(file, root), node: root}
		apiVersion, kind, ok := typeOf(root, src, rule, errs)
		if !ok {
			continue
		}
		if apiVersion == "v1" && kind == "List" {
			items := lookupNode(root, []any{"items"})
			if items == root || items.Kind != yaml.SequenceNode {
				if items != root && items.Tag == "!!null" {
					continue
				}
				errs.Errorf(rule, src.Pos, "items", "a v1 List needs an items list (document %d)", doc)
				continue
			}
			for i, item := range items.Content {
				isrc := Source{File: file, Doc: doc, Item: i + 1, Pos: nodePos(file, item), node: item}
				if av, k, ok := typeOf(item, isrc, rule, errs); ok {
					fn(item, isrc, av, k)
				}
			}
			continue
		}
		fn(root, src, apiVersion, kind)
	}
}

// maxAliasExpansion is how many values a document's aliases may add,
// beyond twice what it writes, before it is refused.
const maxAliasExpansion = 100_000

// aliasExpansion counts the nodes of the tree at n as written, and as its
// aliases expand it (each alias counted as the tree it names), stopping
// once the expansion passes any limit the caller could set. Each node is
// costed once: a chain of aliases is counted, not walked.
func aliasExpansion(n *yaml.Node) (written, expanded int) {
	size := map[*yaml.Node]int{}
	const capAt = 1 << 40
	var walk func(*yaml.Node) int
	walk = func(n *yaml.Node) int {
		if s, ok := size[n]; ok {
			return s
		}
		size[n] = 1 // a cycle counts once
		total := 1
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			total = min(total+walk(n.Alias), capAt)
		} else {
			written++
			for _, c := range n.Content {
				total = min(total+walk(c), capAt)
			}
		}
		size[n] = total
		return size[n]
	}
	expanded = walk(n)
	return written, expanded
}

// where names a manifest object at the end of a message: " (document 2)"
// or " (document 1, items[3])".
func (s Source) where() string {
	if s.Item > 0 {
		return fmt.Sprintf(" (document %d, items[%d])", s.Doc, s.Item-1)
	}
	return fmt.Sprintf(" (document %d)", s.Doc)
}

func typeOf(obj *yaml.Node, src Source, rule string, errs *diag.List) (apiVersion, kind string, ok bool) {
	if obj.Kind != yaml.MappingNode {
		errs.Errorf(rule, src.Pos, "", "expected a Kubernetes object (a mapping with apiVersion and kind), found %s%s", describe(obj), src.where())
		return "", "", false
	}
	get := func(field string) string {
		n := lookupNode(obj, []any{field})
		if n == obj || n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
			return ""
		}
		return n.Value
	}
	apiVersion, kind = get("apiVersion"), get("kind")
	if apiVersion == "" || kind == "" {
		errs.Errorf(rule, src.Pos, "", "a Kubernetes object needs string fields apiVersion and kind%s", src.where())
		return "", "", false
	}
	return apiVersion, kind, true
}

// add decodes one intent object into m.
func (m *Manifests) add(obj *yaml.Node, src Source, apiVersion, kind string, errs *diag.List) {
	d := &yamlDecoder{file: src.File, strict: true, rule: RuleManifest, what: src.where(), errs: errs}
	before := len(*errs)
	v3kind, inIntent, isCalico := calicoKind(apiVersion, kind)
	switch {
	case isCalico && inIntent:
		m.Calico.addCalico(obj, src, v3kind, d)
	case isCalico:
		errs.Errorf(RuleManifest, src.Pos, "", "kind %s %s is how a Kubernetes-datastore cluster stores Calico's %s; write it as apiVersion projectcalico.org/v3, kind %s (what `calicoctl get %s -o yaml` prints)%s", apiVersion, kind, v3kind, v3kind, strings.ToLower(v3kind), src.where())
		return
	default:
		m.addOther(obj, src, apiVersion, kind, d, errs)
		if d.rejected {
			return
		}
	}
	if len(*errs) == before {
		name := lookupNode(obj, []any{"metadata", "name"})
		if name.Kind != yaml.ScalarNode || name.Value == "" {
			d.errorf(lookupNode(obj, []any{"metadata"}), "metadata.name", "%s %s has no metadata.name", apiVersion, kind)
		}
	}
	m.objects++
}

// addOther decodes an intent object that is not Calico configuration.
func (m *Manifests) addOther(obj *yaml.Node, src Source, apiVersion, kind string, d *yamlDecoder, errs *diag.List) {
	switch apiVersion + " " + kind {
	case "networking.k8s.io/v1 NetworkPolicy":
		if !m.admitPolicy(obj, src, apiVersion, kind, errs) {
			d.rejected = true
			return
		}
		var p NetworkPolicy
		d.decode(obj, reflect.ValueOf(&p.NetworkPolicy).Elem(), "")
		p.Source = src
		checkNetworkPolicy(&p, d)
		m.NetworkPolicies = append(m.NetworkPolicies, p)
	case "projectcalico.org/v3 NetworkPolicy", "projectcalico.org/v3 GlobalNetworkPolicy":
		if !m.admitPolicy(obj, src, apiVersion, kind, errs) {
			d.rejected = true
			return
		}
		var p CalicoPolicy
		d.catalog = kind
		d.decode(obj, reflect.ValueOf(&p).Elem(), "")
		p.Global, p.Source = kind == "GlobalNetworkPolicy", src
		checkCalicoPolicy(&p, d)
		m.CalicoPolicies = append(m.CalicoPolicies, p)
	case "projectcalico.org/v3 Tier":
		var t Tier
		d.decode(obj, reflect.ValueOf(&t).Elem(), "")
		t.Source = src
		if a := t.Spec.DefaultAction; a != "" && a != "Deny" && a != "Pass" {
			d.errorf(lookupNode(obj, []any{"spec", "defaultAction"}), "spec.defaultAction", "defaultAction must be Deny or Pass, not %q", a)
		}
		m.Tiers = append(m.Tiers, t)
	case "projectcalico.org/v3 HostEndpoint":
		var h HostEndpoint
		d.decode(obj, reflect.ValueOf(&h).Elem(), "")
		h.Source = src
		if h.Spec.Node == "" {
			d.errorf(lookupNode(obj, []any{"spec"}), "spec.node", "a HostEndpoint needs spec.node, the node whose interface it is")
		}
		if h.Spec.InterfaceName == "" && len(h.Spec.ExpectedIPs) == 0 {
			d.errorf(lookupNode(obj, []any{"spec"}), "spec", "a HostEndpoint needs spec.interfaceName or spec.expectedIPs")
		}
		m.HostEndpoints = append(m.HostEndpoints, h)
	case "v1 Namespace":
		var ns Namespace
		d.decode(obj, reflect.ValueOf(&ns.Namespace).Elem(), "")
		ns.Source = src
		m.Namespaces = append(m.Namespaces, ns)
	case "v1 Service":
		var s Service
		d.decode(obj, reflect.ValueOf(&s.Service).Elem(), "")
		s.Source = src
		m.Services = append(m.Services, s)
	default:
		hint := ""
		if inventoryKinds[kind] {
			hint = "; live state such as this belongs in an --inventory file, not in the intent"
		}
		errs.Errorf(RuleManifest, src.Pos, "", "kind %s %s is not intent; accepted kinds: %s%s%s", apiVersion, kind, intentKinds, hint, src.where())
		d.rejected = true
	}
}

func checkNetworkPolicy(p *NetworkPolicy, d *yamlDecoder) {
	check := func(dir string, i, j int, cidr string, except []string) {
		base := []any{"spec", dir, i, map[string]string{"ingress": "from", "egress": "to"}[dir], j, "ipBlock"}
		pos := func(tail ...any) *yaml.Node {
			return lookupNode(p.Source.node, append(base[:len(base):len(base)], tail...))
		}
		path := fmt.Sprintf("spec.%s[%d].%s[%d].ipBlock", dir, i, base[3], j)
		parent, err := parseCIDR(cidr, false)
		if err != nil {
			d.errorf(pos("cidr"), path+".cidr", "%v", err)
			return
		}
		if parent != parent.Masked() {
			d.errs.Errorf(RuleHostBits, nodePos(d.file, pos("cidr")), path+".cidr", "%s has host bits set; write %s%s", parent, parent.Masked(), d.what)
		}
		for k, e := range except {
			ep, err := parseCIDR(e, false)
			if err != nil {
				d.errorf(pos("except", k), fmt.Sprintf("%s.except[%d]", path, k), "%v", err)
				continue
			}
			if !parent.Masked().Contains(ep.Addr()) || ep.Bits() < parent.Bits() {
				d.errorf(pos("except", k), fmt.Sprintf("%s.except[%d]", path, k), "except %s is not inside cidr %s", ep, parent.Masked())
			}
		}
	}
	for i, r := range p.Spec.Ingress {
		for j, peer := range r.From {
			if peer.IPBlock != nil {
				check("ingress", i, j, peer.IPBlock.CIDR, peer.IPBlock.Except)
			}
		}
	}
	for i, r := range p.Spec.Egress {
		for j, peer := range r.To {
			if peer.IPBlock != nil {
				check("egress", i, j, peer.IPBlock.CIDR, peer.IPBlock.Except)
			}
		}
	}
	for i, t := range p.Spec.PolicyTypes {
		if t != "Ingress" && t != "Egress" {
			d.errorf(lookupNode(p.Source.node, []any{"spec", "policyTypes", i}), fmt.Sprintf("spec.policyTypes[%d]", i), "policy type must be Ingress or Egress, not %q", t)
		}
	}
}

func checkCalicoPolicy(p *CalicoPolicy, d *yamlDecoder) {
	at := func(path ...any) *yaml.Node { return lookupNode(p.Source.node, path) }
	if p.Global && p.Namespace != "" {
		d.errorf(at("metadata", "namespace"), "metadata.namespace", "a GlobalNetworkPolicy is not namespaced; remove metadata.namespace")
	}
	if !p.Global {
		for field, set := range map[string]bool{"namespaceSelector": p.Spec.NamespaceSelector != "", "doNotTrack": p.Spec.DoNotTrack, "preDNAT": p.Spec.PreDNAT, "applyOnForward": p.Spec.ApplyOnForward} {
			if set {
				d.errorf(at("spec", field), "spec."+field, "%s exists only on GlobalNetworkPolicy", field)
			}
		}
	}
	for i, t := range p.Spec.Types {
		if t != "Ingress" && t != "Egress" {
			d.errorf(at("spec", "types", i), fmt.Sprintf("spec.types[%d]", i), "policy type must be Ingress or Egress, not %q", t)
		}
	}
	// Calico's own validation of the host endpoint flags
	// (libcalico-go's validator, validateGlobalNetworkPolicySpec).
	s := &p.Spec
	if s.DoNotTrack && s.PreDNAT {
		d.errorf(at("spec", "preDNAT"), "spec.preDNAT", "preDNAT and doNotTrack cannot both be true: a policy is untracked or pre-DNAT, not both")
	}
	if !s.ApplyOnForward && (s.DoNotTrack || s.PreDNAT) && p.Global {
		field := "doNotTrack"
		if s.PreDNAT {
			field = "preDNAT"
		}
		d.errorf(at("spec", field), "spec.applyOnForward", "applyOnForward must be true when %s is: set applyOnForward: true", field)
	}
	if s.PreDNAT && len(s.Egress) > 0 {
		d.errorf(at("spec", "egress"), "spec.egress", "a preDNAT policy cannot have egress rules: it applies to traffic entering a host endpoint")
	}
	if s.PreDNAT && slices.Contains(s.Types, "Egress") {
		d.errorf(at("spec", "types"), "spec.types", "a preDNAT policy cannot have type Egress: it applies to traffic entering a host endpoint")
	}
	for _, dir := range []string{"ingress", "egress"} {
		rules := p.Spec.Ingress
		if dir == "egress" {
			rules = p.Spec.Egress
		}
		for i, r := range rules {
			switch r.Action {
			case "Allow", "Deny", "Log", "Pass":
			default:
				d.errorf(at("spec", dir, i, "action"), fmt.Sprintf("spec.%s[%d].action", dir, i), "action must be Allow, Deny, Log or Pass, not %q", r.Action)
			}
			if v := r.IPVersion; v != nil && *v != 4 && *v != 6 {
				d.errorf(at("spec", dir, i, "ipVersion"), fmt.Sprintf("spec.%s[%d].ipVersion", dir, i), "ipVersion must be 4 or 6, not %d", *v)
			}
		}
	}
}

// ReadManifests decodes the manifests of one file's content, as Load does
// for each file below the intent directory (for tests and fuzzing).
func ReadManifests(file string, data []byte, errs *diag.List) Manifests {
	var m Manifests
	forEachObjectOf(file, data, RuleManifest, errs, &m.values, func(obj *yaml.Node, src Source, apiVersion, kind string) {
		m.add(obj, src, apiVersion, kind, errs)
	})
	return m
}

// badChar finds the first character that a YAML stream may not hold
// (YAML 1.2 §5.1, c-printable): invalid UTF-8, a C0 control other than
// tab, LF and CR, DEL, a C1 control other than NEL, U+FFFE and U+FFFF. It
// returns its 1-based line and column (in characters) and what it is.
func badChar(data []byte) (line, col int, what string, bad bool) {
	line, col = 1, 1
	for i := 0; i < len(data); {
		c := data[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '\n':
				line, col = line+1, 1
			case c == '\t' || c == '\r' || (c >= 0x20 && c != 0x7f):
				col++
			default:
				return line, col, fmt.Sprintf("control character %U", c), true
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return line, col, fmt.Sprintf("invalid UTF-8 (byte 0x%02x)", c), true
		case (r >= 0x80 && r < 0xa0 && r != 0x85) || r == 0xfffe || r == 0xffff:
			return line, col, fmt.Sprintf("control character %U", r), true
		}
		col++
		i += size
	}
	return 0, 0, "", false
}
