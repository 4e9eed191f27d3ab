package examples_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The CI tests run hnsplan-pr.sh against fake forges: a gh and a curl on
// PATH that keep a pull request's comments (a merge request's notes) in a
// JSON file, apply each call to it the way the real API would, refuse what
// the real API would refuse, and log every call. Filters go through the real
// jq, as gh's --jq applies them (gh embeds a jq implementation).

// fakeGH answers the gh api calls hnsplan-pr.sh makes, for pull request
// $FAKE_PR of $FAKE_REPO. Comments it creates are by $FAKE_LOGIN.
const fakeGH = `#!/bin/sh
set -eu
state=$FAKE_STATE
printf 'gh %s\n' "$*" >>"$state/calls.log"
fail() { echo "fake gh: $*" >&2; exit 1; }
[ "${1:-}" = api ] || fail "only gh api is served, not: $*"
shift
method=GET paginate=false filter= body= url=
while [ $# -gt 0 ]; do
	case $1 in
	--method) method=$2; shift 2 ;;
	--paginate) paginate=true; shift ;;
	--jq) filter=$2; shift 2 ;;
	-F) case $2 in body=@*) body=${2#body=@} ;; *) fail "unexpected field $2" ;; esac; shift 2 ;;
	-*) fail "unexpected flag $1" ;;
	*) [ -z "$url" ] || fail "two endpoints: $url $1"; url=$1; shift ;;
	esac
done
[ -n "${GH_TOKEN:-}" ] || fail "gh: To use GitHub CLI in a GitHub Actions workflow, set the GH_TOKEN environment variable"
comments=$state/comments.json
issue=repos/$FAKE_REPO/issues/$FAKE_PR
case "$method $url" in
"GET $issue/comments?per_page=100")
	[ "$paginate" = true ] || fail "a list of comments without --paginate misses all past the first page"
	if [ -n "$filter" ]; then jq -r "$filter" "$comments"; else cat "$comments"; fi
	;;
"PATCH repos/$FAKE_REPO/issues/comments/"*)
	id=${url##*/}
	[ -f "$body" ] || fail "no body file $body"
	author=$(jq -r --argjson id "$id" '.[] | select(.id == $id) | .user.login' "$comments")
	[ -n "$author" ] || fail "HTTP 404: comment $id not found"
	[ "$author" = "$FAKE_LOGIN" ] || fail "HTTP 403: comment $id is by $author"
	jq --argjson id "$id" --rawfile b "$body" 'map(if .id == $id then .body = $b else . end)' "$comments" >"$comments.new"
	mv "$comments.new" "$comments"
	echo '{}'
	;;
"POST $issue/comments")
	[ -f "$body" ] || fail "no body file $body"
	jq --arg login "$FAKE_LOGIN" --rawfile b "$body" '. + [{id: ((map(.id) | max // 0) + 1), user: {login: $login}, body: $b}]' "$comments" >"$comments.new"
	mv "$comments.new" "$comments"
	echo '{}'
	;;
*) fail "HTTP 404: $method $url" ;;
esac
`

// fakeCurl answers the GitLab API calls hnsplan-pr.sh makes with curl, for
// merge request $FAKE_MR of project $FAKE_PROJECT under $FAKE_API. The token
// $FAKE_TOKEN belongs to user $FAKE_USER_ID.
const fakeCurl = `#!/bin/sh
set -eu
state=$FAKE_STATE
printf 'curl %s\n' "$*" >>"$state/calls.log"
fail() { echo "fake curl: $*" >&2; exit 2; }
http() { printf '{"message":"%s"}\n' "$1"; exit 22; }
method= token= body= url= failbody=false
while [ $# -gt 0 ]; do
	case $1 in
	--silent | --show-error) shift ;;
	--fail-with-body) failbody=true; shift ;;
	--header) case $2 in "PRIVATE-TOKEN: "*) token=${2#PRIVATE-TOKEN: } ;; *) fail "unexpected header $2" ;; esac; shift 2 ;;
	--request) method=$2; shift 2 ;;
	--data-urlencode) case $2 in body@*) body=${2#body@} ;; *) fail "unexpected data $2" ;; esac; shift 2 ;;
	-*) fail "unexpected flag $1" ;;
	*) [ -z "$url" ] || fail "two URLs: $url $1"; url=$1; shift ;;
	esac
done
[ "$failbody" = true ] || fail "without --fail-with-body an HTTP error looks like success"
if [ -z "$method" ]; then if [ -n "$body" ]; then method=POST; else method=GET; fi; fi
[ "$token" = "$FAKE_TOKEN" ] || http "401 Unauthorized"
notes_json=$state/notes.json
notes=$FAKE_API/projects/$FAKE_PROJECT/merge_requests/$FAKE_MR/notes
case "$method $url" in
"GET $FAKE_API/user")
	printf '{"id": %s, "username": "project_%s_bot"}\n' "$FAKE_USER_ID" "$FAKE_PROJECT"
	;;
"GET $notes?"*)
	query=${url#*\?}
	page=$(printf '%s\n' "$query" | tr '&' '\n' | sed -n 's/^page=//p')
	per=$(printf '%s\n' "$query" | tr '&' '\n' | sed -n 's/^per_page=//p')
	case "$page$per" in '' | *[!0-9]*) fail "page and per_page must be numbers: $query" ;; esac
	jq -c --argjson p "$page" --argjson n "$per" '.[($p - 1) * $n : $p * $n]' "$notes_json"
	;;
"PUT $notes/"*)
	id=${url##*/}
	[ -f "$body" ] || fail "no body file $body"
	author=$(jq -r --argjson id "$id" '.[] | select(.id == $id) | .author.id' "$notes_json")
	[ -n "$author" ] || http "404 Not found"
	[ "$author" = "$FAKE_USER_ID" ] || http "403 Forbidden"
	jq --argjson id "$id" --rawfile b "$body" 'map(if .id == $id then .body = $b else . end)' "$notes_json" >"$notes_json.new"
	mv "$notes_json.new" "$notes_json"
	echo '{}'
	;;
"POST $notes")
	[ -f "$body" ] || fail "no body file $body"
	jq --argjson me "$FAKE_USER_ID" --rawfile b "$body" '. + [{id: ((map(.id) | max // 0) + 1), author: {id: $me}, system: false, body: $b}]' "$notes_json" >"$notes_json.new"
	mv "$notes_json.new" "$notes_json"
	echo '{}'
	;;
*) http "404 Not found: $method $url" ;;
esac
`

// fakeForge is the state of one fake: its bin directory (for PATH), its
// state directory and the environment its script reads.
type fakeForge struct {
	bin, state string
	env        []string
}

// newFakeForge installs script as bin/name with items (the comments or
// notes already there) as its state file.
func newFakeForge(t *testing.T, name, script, stateFile string, items any, env ...string) *fakeForge {
	t.Helper()
	f := &fakeForge{bin: t.TempDir(), state: t.TempDir()}
	if err := os.WriteFile(filepath.Join(f.bin, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := json.Marshal(items)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.state, stateFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	f.env = append(env, "FAKE_STATE="+f.state)
	return f
}

// calls returns the calls logged since the last call of calls.
func (f *fakeForge) calls(t *testing.T) []string {
	t.Helper()
	log := filepath.Join(f.state, "calls.log")
	data, err := os.ReadFile(log)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// load decodes the state file into v.
func (f *fakeForge) load(t *testing.T, stateFile string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.state, stateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v\n%s", stateFile, err, data)
	}
}
