#!/bin/sh
# hnsplan-pr.sh — vet a Windows network intent and keep one comment on the
# pull or merge request that shows its HNS plan diff.
#
# Copy this file into your repository as ci/hnsplan-pr.sh; the GitHub and
# GitLab examples beside it call it there (with sh, so it needs no exec bit).
#
#   sh ci/hnsplan-pr.sh plan INTENT_DIR BASE_REF OUT.md
#
#     Vets INTENT_DIR, then diffs it from the merge base of BASE_REF (the
#     target branch, e.g. origin/main) and HEAD, so commits the target branch
#     gained since the branch point do not show up reversed. Writes the
#     comment's markdown to OUT.md in every case: the diff, vet's errors, or
#     the failure. Standard output carries only outputs, in the format of
#     $GITHUB_OUTPUT (key=value lines and key<<DELIMITER blocks):
#       changes   true | false | unknown (vet or diff failed)
#       valid     true | false | unknown (vet did not run to the end)
#       comment   create (changes or errors: post or update the comment)
#                 update (no changes: only refresh a comment already there)
#       summary   vet's summary line, or what failed
#       findings  vet's errors and warnings (a block; empty when none)
#     Findings and failures also go to standard error, for the job log.
#     Exits 0 when the intent is valid (changed or not), 1 when vet finds an
#     error or anything fails, 2 on a usage error; OUT.md is written first.
#
#   sh ci/hnsplan-pr.sh comment github|gitlab OUT.md create|update
#
#     Finds the comment this script posted before (the first line of OUT.md,
#     a hidden marker naming the intent, starts it) and replaces its body
#     with OUT.md, or posts a new one if there is none and the mode is
#     create. GitHub: gh with GH_TOKEN, GITHUB_REPOSITORY and HNSPLAN_PR (the
#     pull request number); only comments by HNSPLAN_COMMENT_AUTHOR (default
#     github-actions[bot]) count. GitLab: curl and jq with
#     HNSPLAN_NOTE_TOKEN (api scope), CI_API_V4_URL, CI_PROJECT_ID and
#     CI_MERGE_REQUEST_IID; only notes by the token's own user count.
set -eu

prog=hnsplan-pr.sh
# GitHub refuses comments over 65,536 characters; hnsplan caps its diff at
# 65,000, and the warnings below it are dropped when they would not fit.
max_body=65000
max_pre=60000

die() {
	printf '%s: %s\n' "$prog" "$*" >&2
	exit 1
}

usage() {
	printf 'usage: %s plan INTENT_DIR BASE_REF OUT.md\n       %s comment github|gitlab OUT.md create|update\n' "$prog" "$prog" >&2
	exit 2
}

# html_escape: standard input with &, < and > escaped. Whatever the intent's
# files say (a ``` or a </details> in a message) cannot break the markdown.
html_escape() {
	sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'
}

# html_pre FILE: FILE as a <pre> block, cut at a line end to fit a comment.
html_pre() {
	printf '<pre>\n'
	html_escape <"$1" >"$1.html"
	if [ "$(wc -c <"$1.html")" -gt "$max_pre" ]; then
		head -c "$max_pre" "$1.html" | sed '$d'
		printf '[cut here: the job log has the rest]\n'
	else
		cat "$1.html"
	fi
	printf '</pre>\n'
}

# output KEY VALUE: one key=value line; VALUE must be a single line.
output() {
	case $2 in
	*'
'*) die "output $1 has a newline; write it with output_block" ;;
	esac
	printf '%s=%s\n' "$1" "$2"
}

# output_block KEY FILE: a key<<DELIMITER block, with a delimiter that
# cannot occur in FILE.
output_block() {
	delim="HNSPLAN_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
	if grep -qxF "$delim" "$2"; then
		die "output $2 contains its delimiter $delim"
	fi
	printf '%s<<%s\n' "$1" "$delim"
	cat "$2"
	# The runner reads the delimiter only at the start of a line.
	if [ -s "$2" ] && [ "$(tail -c 1 "$2" | od -An -c | tr -d ' ')" != '\n' ]; then
		printf '\n'
	fi
	printf '%s\n' "$delim"
}

# The marker goes into an HTML comment and a jq string: allow only what a
# plain directory path needs, and no "--", which would end the comment.
check_intent_name() {
	case $1 in
	'' | *[!A-Za-z0-9._/-]* | *--*)
		die "intent directory \"$1\": use a path of letters, digits, '.', '_', '/' and single '-' (it names the comment)"
		;;
	esac
}

plan() {
	[ $# -eq 3 ] || usage
	intent=${1%/}
	base_ref=$2
	out=$3
	check_intent_name "$intent"
	command -v hnsplan >/dev/null 2>&1 ||
		die "hnsplan is not on PATH: install it with go install github.com/hnsplan/hnsplan/cmd/hnsplan@VERSION"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	: >"$tmp/findings"
	marker="<!-- hnsplan-diff $intent -->"
	heading='### hnsplan: Windows HNS plan diff'

	# fail TITLE DETAIL_FILE: the comment says what failed, the job fails.
	fail() {
		{
			printf '%s\n%s\n\n**%s**\n\n' "$marker" "$heading" "$(printf '%s' "$1" | html_escape)"
			html_pre "$2"
		} >"$out"
		printf '%s: %s\n' "$prog" "$1" >&2
		cat "$2" >&2
		output changes unknown
		output valid "$valid"
		output comment create
		output summary "$1"
		output_block findings "$tmp/findings"
		exit 1
	}

	valid=unknown
	summary="$intent does not exist at HEAD"
	if [ -e "$intent" ]; then
		vrc=0
		hnsplan vet --color never --severity warning "$intent" >"$tmp/vet.out" 2>"$tmp/vet.err" || vrc=$?
		case $vrc in
		0 | 1)
			# vet prints one finding a line, then its summary line.
			summary=$(tail -n 1 "$tmp/vet.out")
			sed '$d' "$tmp/vet.out" >"$tmp/findings"
			cat "$tmp/vet.out" >&2
			;;
		*)
			cat "$tmp/vet.out" >>"$tmp/vet.err"
			fail "hnsplan vet $intent failed (exit $vrc)" "$tmp/vet.err"
			;;
		esac
		if [ "$vrc" -eq 1 ]; then
			{
				printf '%s\n%s\n\n' "$marker" "$heading"
				# shellcheck disable=SC2016 # the backticks are markdown
				printf '**`%s` is invalid: hnsplan vet found errors, and the diff is shown once they are fixed.**\n\n' "$intent"
				html_pre "$tmp/vet.out"
			} >"$out"
			output changes unknown
			output valid false
			output comment create
			output summary "$summary"
			output_block findings "$tmp/findings"
			exit 1
		fi
	fi

	valid=true

	if ! base=$(git merge-base "$base_ref" HEAD 2>"$tmp/git.err"); then
		fail "no merge base of $base_ref and HEAD: check out the full history (fetch-depth: 0, GIT_DEPTH: 0) and fetch the target branch" "$tmp/git.err"
	fi
	drc=0
	hnsplan diff --color never --base "$base" "$intent" -o markdown --detailed-exitcode >"$tmp/diff.md" 2>"$tmp/diff.err" || drc=$?
	case $drc in
	0) changes=false mode=update ;;
	2) changes=true mode=create ;;
	*)
		cat "$tmp/diff.md" >>"$tmp/diff.err"
		fail "hnsplan diff --base $base_ref $intent failed (exit $drc)" "$tmp/diff.err"
		;;
	esac

	{
		printf '%s\n' "$marker"
		cat "$tmp/diff.md"
	} >"$tmp/body.md"
	if [ -s "$tmp/findings" ]; then
		# Valid, with warnings: below the diff, folded.
		{
			printf '\n<details><summary>hnsplan vet: %s</summary>\n\n' "$(printf '%s' "$summary" | html_escape)"
			html_pre "$tmp/findings"
			printf '\n</details>\n'
		} >"$tmp/vet.md"
		if [ $(($(wc -c <"$tmp/body.md") + $(wc -c <"$tmp/vet.md"))) -le "$max_body" ]; then
			cat "$tmp/vet.md" >>"$tmp/body.md"
		else
			printf '\nhnsplan vet: %s (the findings are in the job log)\n' "$(printf '%s' "$summary" | html_escape)" >>"$tmp/body.md"
		fi
	fi
	cp "$tmp/body.md" "$out"
	printf '%s: %s; changes: %s\n' "$prog" "$summary" "$changes" >&2
	output changes "$changes"
	output valid true
	output comment "$mode"
	output summary "$summary"
	output_block findings "$tmp/findings"
}

comment() {
	[ $# -eq 3 ] || usage
	forge=$1
	md=$2
	mode=$3
	case $mode in create | update) ;; *) usage ;; esac
	[ -s "$md" ] || die "$md is missing or empty: run '$prog plan' first"
	marker=$(head -n 1 "$md")
	case $marker in
	'<!-- hnsplan-diff '*' -->')
		name=${marker#'<!-- hnsplan-diff '}
		check_intent_name "${name%' -->'}"
		;;
	*) die "$md does not start with the <!-- hnsplan-diff INTENT_DIR --> marker '$prog plan' writes" ;;
	esac
	case $forge in
	github) github_comment ;;
	gitlab) gitlab_note ;;
	*) usage ;;
	esac
}

github_comment() {
	: "${GITHUB_REPOSITORY:?set by the runner: owner/name}"
	: "${HNSPLAN_PR:?set HNSPLAN_PR to the pull request number}"
	author=${HNSPLAN_COMMENT_AUTHOR:-github-actions[bot]}
	case $GITHUB_REPOSITORY in
	*[!A-Za-z0-9._/-]* | */*/* | /* | */) die "GITHUB_REPOSITORY \"$GITHUB_REPOSITORY\" is not owner/name" ;;
	*/*) ;;
	*) die "GITHUB_REPOSITORY \"$GITHUB_REPOSITORY\" is not owner/name" ;;
	esac
	case $HNSPLAN_PR in '' | *[!0-9]*) die "HNSPLAN_PR \"$HNSPLAN_PR\" is not a pull request number" ;; esac
	# It goes into the jq filter below.
	case $author in '' | *[!]A-Za-z0-9_.[-]*) die "HNSPLAN_COMMENT_AUTHOR \"$author\" is not a GitHub login" ;; esac
	command -v gh >/dev/null 2>&1 || die "gh (the GitHub CLI) is not on PATH"

	issue="repos/$GITHUB_REPOSITORY/issues/$HNSPLAN_PR"
	ids=$(gh api --paginate "$issue/comments?per_page=100" \
		--jq ".[] | select(.user.login == \"$author\" and (.body | startswith(\"$marker\"))) | .id")
	id=$(printf '%s\n' "$ids" | head -n 1)
	case $id in *[!0-9]*) die "gh returned a comment id \"$id\" that is not a number" ;; esac
	if [ -n "$id" ]; then
		gh api --method PATCH "repos/$GITHUB_REPOSITORY/issues/comments/$id" -F "body=@$md" >/dev/null
		printf '%s: updated comment %s on pull request %s\n' "$prog" "$id" "$HNSPLAN_PR" >&2
	elif [ "$mode" = create ]; then
		gh api --method POST "$issue/comments" -F "body=@$md" >/dev/null
		printf '%s: commented on pull request %s\n' "$prog" "$HNSPLAN_PR" >&2
	else
		printf '%s: no changes and no earlier comment: nothing to post\n' "$prog" >&2
	fi
}

gitlab_note() {
	: "${CI_API_V4_URL:?set by the runner}" "${CI_PROJECT_ID:?set by the runner}"
	: "${CI_MERGE_REQUEST_IID:?set by the runner in merge request pipelines}"
	: "${HNSPLAN_NOTE_TOKEN:?set the CI/CD variable HNSPLAN_NOTE_TOKEN to an access token with the api scope}"
	case $CI_PROJECT_ID in '' | *[!0-9]*) die "CI_PROJECT_ID \"$CI_PROJECT_ID\" is not a number" ;; esac
	case $CI_MERGE_REQUEST_IID in '' | *[!0-9]*) die "CI_MERGE_REQUEST_IID \"$CI_MERGE_REQUEST_IID\" is not a number" ;; esac
	command -v curl >/dev/null 2>&1 || die "curl is not on PATH"
	command -v jq >/dev/null 2>&1 || die "jq is not on PATH: install it (apt-get install jq)"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT

	# api RESPONSE_FILE CURL_ARGS...: a failed call stops the job and
	# shows GitLab's answer.
	api() {
		resp=$1
		shift
		rc=0
		curl --silent --show-error --fail-with-body --header "PRIVATE-TOKEN: $HNSPLAN_NOTE_TOKEN" "$@" >"$resp" || rc=$?
		if [ "$rc" -ne 0 ]; then
			printf '%s: the GitLab API call failed (curl exit %s):\n' "$prog" "$rc" >&2
			cat "$resp" >&2
			printf '\n' >&2
			die "check HNSPLAN_NOTE_TOKEN: an access token with the api scope whose user may comment on merge requests of project $CI_PROJECT_ID"
		fi
	}
	notes="$CI_API_V4_URL/projects/$CI_PROJECT_ID/merge_requests/$CI_MERGE_REQUEST_IID/notes"
	api "$tmp/user.json" "$CI_API_V4_URL/user"
	me=$(jq -er '.id | numbers' "$tmp/user.json") || die "GET /user did not return the token's user id"

	id=
	page=1
	while :; do
		api "$tmp/notes.json" "$notes?sort=asc&order_by=created_at&per_page=100&page=$page"
		id=$(jq -r --arg m "$marker" --argjson me "$me" \
			'[.[] | select(.author.id == $me and (.body | startswith($m))) | .id] | first // empty' "$tmp/notes.json") ||
			die "the notes of merge request $CI_MERGE_REQUEST_IID are not a JSON array"
		n=$(jq 'length' "$tmp/notes.json")
		if [ -n "$id" ] || [ "$n" -lt 100 ]; then
			break
		fi
		page=$((page + 1))
		[ "$page" -le 100 ] || die "merge request $CI_MERGE_REQUEST_IID has more than 10,000 notes"
	done
	case $id in *[!0-9]*) die "GitLab returned a note id \"$id\" that is not a number" ;; esac
	if [ -n "$id" ]; then
		api "$tmp/put.json" --request PUT --data-urlencode "body@$md" "$notes/$id"
		printf '%s: updated note %s on merge request %s\n' "$prog" "$id" "$CI_MERGE_REQUEST_IID" >&2
	elif [ "$mode" = create ]; then
		api "$tmp/post.json" --request POST --data-urlencode "body@$md" "$notes"
		printf '%s: added a note to merge request %s\n' "$prog" "$CI_MERGE_REQUEST_IID" >&2
	else
		printf '%s: no changes and no earlier note: nothing to post\n' "$prog" >&2
	fi
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
plan) plan "$@" ;;
comment) comment "$@" ;;
*) usage ;;
esac
