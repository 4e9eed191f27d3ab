package selector

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// A SyntaxError reports why and where a selector failed to parse.
type SyntaxError struct {
	Selector string // the whole input
	Offset   int    // byte offset of the problem in Selector; len(Selector) at the end
	Msg      string // what is wrong, e.g. `expected a quoted string`
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("selector %q: %s at offset %d", e.Selector, e.Msg, e.Offset)
}

// kind is the kind of a token.
type kind uint8

const (
	tokEOF        kind = iota
	tokLabel           // label key; text is the key
	tokString          // quoted string; text is the content without quotes
	tokLParen          // (
	tokRParen          // )
	tokLBrace          // {
	tokRBrace          // }
	tokComma           // ,
	tokEq              // ==
	tokNe              // !=
	tokNot             // !
	tokAnd             // &&
	tokOr              // ||
	tokContains        // contains
	tokStartsWith      // starts with
	tokEndsWith        // ends with
	tokIn              // in
	tokNotIn           // not in
	tokHas             // has(key); text is the key
	tokAll             // all()
	tokGlobal          // global()
)

var tokenNames = [...]string{
	tokLParen:     `"("`,
	tokRParen:     `")"`,
	tokLBrace:     `"{"`,
	tokRBrace:     `"}"`,
	tokComma:      `","`,
	tokEq:         `"=="`,
	tokNe:         `"!="`,
	tokNot:        `"!"`,
	tokAnd:        `"&&"`,
	tokOr:         `"||"`,
	tokContains:   `"contains"`,
	tokStartsWith: `"starts with"`,
	tokEndsWith:   `"ends with"`,
	tokIn:         `"in"`,
	tokNotIn:      `"not in"`,
	tokAll:        `"all()"`,
	tokGlobal:     `"global()"`,
}

type token struct {
	kind kind
	text string
	off  int // byte offset of the token's first byte
}

// describe names t for an error message.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of selector"
	case tokLabel:
		return fmt.Sprintf("label %q", t.text)
	case tokString:
		return fmt.Sprintf("string %q", t.text)
	case tokHas:
		return fmt.Sprintf("has(%s)", t.text)
	}
	return tokenNames[t.kind]
}

// isBlank reports whether c separates tokens. Like Calico, only space and tab.
func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func isKeyByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '_' || c == '.' || c == '/' || c == '-'
}

type parser struct {
	src  string
	pos  int // lexer position in src
	toks []token
	next int // parser position in toks
}

func (p *parser) errorf(off int, format string, args ...any) error {
	return &SyntaxError{Selector: p.src, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// expected returns an error saying what was expected instead of t.
func (p *parser) expected(what string, t token) error {
	if t.kind == tokEOF {
		return p.errorf(t.off, "expected %s", what)
	}
	return p.errorf(t.off, "expected %s, found %s", what, t.describe())
}

func (p *parser) skipBlanks() {
	for p.pos < len(p.src) && isBlank(p.src[p.pos]) {
		p.pos++
	}
}

// word consumes w if the input continues with it. Like Calico, it does not
// require a word boundary after w: "startswith" and "notin" are accepted.
func (p *parser) word(w string) bool {
	if strings.HasPrefix(p.src[p.pos:], w) {
		p.pos += len(w)
		return true
	}
	return false
}

// key consumes a label key and returns it, or "" if there is none.
func (p *parser) key() string {
	start := p.pos
	for p.pos < len(p.src) && isKeyByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// tokenize splits p.src into p.toks, ending with a tokEOF. It follows
// Calico's tokenizer, including its context rule: a word after a label is
// an operator, never another label.
func (p *parser) tokenize() error {
	for {
		p.skipBlanks()
		start := p.pos
		if p.pos == len(p.src) {
			p.emit(tokEOF, "", start)
			return nil
		}
		afterLabel := len(p.toks) > 0 && p.toks[len(p.toks)-1].kind == tokLabel
		switch c := p.src[p.pos]; c {
		case '(', ')', '{', '}', ',':
			p.pos++
			p.emit(punctuation(c), "", start)
		case '"', '\'':
			end := strings.IndexByte(p.src[p.pos+1:], c)
			if end < 0 {
				return p.errorf(start, "unterminated string")
			}
			p.emit(tokString, p.src[p.pos+1:p.pos+1+end], start)
			p.pos += end + 2
		case '=':
			if !p.word("==") {
				return p.errorf(start, `expected "==", found "="`)
			}
			p.emit(tokEq, "", start)
		case '!':
			if p.word("!=") {
				p.emit(tokNe, "", start)
			} else {
				p.pos++
				p.emit(tokNot, "", start)
			}
		case '&':
			if !p.word("&&") {
				return p.errorf(start, `expected "&&", found "&"`)
			}
			p.emit(tokAnd, "", start)
		case '|':
			if !p.word("||") {
				return p.errorf(start, `expected "||", found "|"`)
			}
			p.emit(tokOr, "", start)
		default:
			if afterLabel {
				k, err := p.operator()
				if err != nil {
					return err
				}
				p.emit(k, "", start)
				continue
			}
			switch {
			case p.word("has("):
				p.skipBlanks()
				keyOff := p.pos
				key := p.key()
				if key == "" {
					return p.errorf(keyOff, "expected a label key in has(...)")
				}
				p.skipBlanks()
				if !p.word(")") {
					return p.errorf(p.pos, `expected ")" to close has(`)
				}
				p.emit(tokHas, key, start)
			case p.word("all("):
				p.skipBlanks()
				if !p.word(")") {
					return p.errorf(p.pos, `expected ")" to close all(`)
				}
				p.emit(tokAll, "", start)
			case p.word("global("):
				p.skipBlanks()
				if !p.word(")") {
					return p.errorf(p.pos, `expected ")" to close global(`)
				}
				p.emit(tokGlobal, "", start)
			default:
				key := p.key()
				if key == "" {
					_, size := utf8.DecodeRuneInString(p.src[p.pos:])
					return p.errorf(start, "unexpected character %q", p.src[p.pos:p.pos+size])
				}
				p.emit(tokLabel, key, start)
			}
		}
	}
}

func (p *parser) emit(k kind, text string, off int) {
	p.toks = append(p.toks, token{kind: k, text: text, off: off})
}

// punctuation returns the kind of a one-byte token.
func punctuation(c byte) kind {
	switch c {
	case '(':
		return tokLParen
	case ')':
		return tokRParen
	case '{':
		return tokLBrace
	case '}':
		return tokRBrace
	}
	return tokComma
}

// operator lexes the word operator that must follow a label.
func (p *parser) operator() (kind, error) {
	label := p.toks[len(p.toks)-1].text
	start := p.pos
	switch {
	case p.word("contains"):
		return tokContains, nil
	case p.word("starts"):
		p.skipBlanks()
		if p.word("with") {
			return tokStartsWith, nil
		}
	case p.word("ends"):
		p.skipBlanks()
		if p.word("with") {
			return tokEndsWith, nil
		}
	case p.word("not"):
		p.skipBlanks()
		if p.word("in") {
			return tokNotIn, nil
		}
	case p.word("in"):
		return tokIn, nil
	}
	return 0, p.errorf(start, "expected an operator after label %q", label)
}

// parse parses p.src into a tree.
func (p *parser) parse() (*node, error) {
	if err := p.tokenize(); err != nil {
		return nil, err
	}
	if p.peek().kind == tokEOF {
		return &node{op: opAll}, nil
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEOF {
		return nil, p.expected(`"&&", "||" or end of selector`, t)
	}
	return n, nil
}

func (p *parser) peek() token { return p.toks[p.next] }

func (p *parser) take() token {
	t := p.toks[p.next]
	if t.kind != tokEOF {
		p.next++
	}
	return t
}

// or parses and { "||" and }.
func (p *parser) or() (*node, error) {
	return p.list(opOr, tokOr, p.and)
}

// and parses operation { "&&" operation }.
func (p *parser) and() (*node, error) {
	return p.list(opAnd, tokAnd, p.operation)
}

// list parses item { sep item }. A single item is returned as is.
func (p *parser) list(o op, sep kind, item func() (*node, error)) (*node, error) {
	n, err := item()
	if err != nil {
		return nil, err
	}
	if p.peek().kind != sep {
		return n, nil
	}
	kids := []*node{n}
	for p.peek().kind == sep {
		p.take()
		n, err := item()
		if err != nil {
			return nil, err
		}
		kids = append(kids, n)
	}
	return &node{op: o, kids: kids}, nil
}

// operation parses a possibly negated operation or parenthesised expression.
// Leading "!"s cancel in pairs, as in Calico.
func (p *parser) operation() (*node, error) {
	negated := false
	for p.peek().kind == tokNot {
		p.take()
		negated = !negated
	}
	n, err := p.positive()
	if err != nil {
		return nil, err
	}
	if !negated {
		return n, nil
	}
	if n.op == opNot {
		// !(!x): Calico would print "!!x", which reparses as x. Collapse
		// here so that String is a fixed point of Parse.
		return n.kids[0], nil
	}
	return &node{op: opNot, kids: []*node{n}}, nil
}

func (p *parser) positive() (*node, error) {
	t := p.take()
	switch t.kind {
	case tokHas:
		return &node{op: opHas, key: t.text}, nil
	case tokAll:
		return &node{op: opAll}, nil
	case tokGlobal:
		return &node{op: opGlobal}, nil
	case tokLParen:
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if c := p.take(); c.kind != tokRParen {
			return nil, p.expected(`"&&", "||" or ")"`, c)
		}
		return n, nil
	case tokLabel:
		return p.labelTest(t.text)
	}
	return nil, p.expected(`a label, "has(", "all()", "global()", "!" or "("`, t)
}

var tokOps = map[kind]op{
	tokEq:         opEq,
	tokNe:         opNe,
	tokContains:   opContains,
	tokStartsWith: opStartsWith,
	tokEndsWith:   opEndsWith,
	tokIn:         opIn,
	tokNotIn:      opNotIn,
}

// labelTest parses the operator and operand after the label key.
func (p *parser) labelTest(key string) (*node, error) {
	t := p.take()
	o, ok := tokOps[t.kind]
	if !ok {
		return nil, p.expected(fmt.Sprintf("an operator after label %q", key), t)
	}
	if o != opIn && o != opNotIn {
		v := p.take()
		if v.kind != tokString {
			return nil, p.expected("a quoted string", v)
		}
		return &node{op: o, key: key, value: v.text}, nil
	}
	if b := p.take(); b.kind != tokLBrace {
		return nil, p.expected(`a set literal in "{...}"`, b)
	}
	var set []string
	wantString := true // after "{" or ","
	for p.peek().kind == tokString {
		set = append(set, p.take().text)
		wantString = p.peek().kind == tokComma
		if !wantString {
			break
		}
		p.take()
	}
	if c := p.take(); c.kind != tokRBrace {
		if wantString {
			return nil, p.expected(`a quoted string or "}"`, c)
		}
		return nil, p.expected(`"," or "}"`, c)
	}
	slices.Sort(set)
	return &node{op: o, key: key, set: slices.Compact(set)}, nil
}
