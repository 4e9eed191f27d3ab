#!/bin/sh
# hnsplan-pr.sh — vet a Windows network intent and keep one comment on the
# pull or merge request that shows its HNS plan diff; after the merge,
# compile, sign and publish it with a canary.
#
# Copy this file into your repository as ci/hnsplan-pr.sh; the GitHub and
# GitLab examples beside it call it there (with sh, so it needs no exec bit).
#
#   sh ci/hnsplan-pr.sh install VERSION DIR
#
#     Downloads the release binary hnsplan-linux-ARCH of VERSION (v1.2.3)
#     and its SHA256SUMS from $HNSPLAN_RELEASE_URL/VERSION (default: the
#     GitHub releases of hnsplan/hnsplan), checks it against SHA256SUMS,
#     installs it as DIR/hnsplan and fails unless `hnsplan version` names
#     VERSION.
#
#   sh ci/hnsplan-pr.sh inventory OUT.yaml
#
#     Reads, with kubectl, every kind hnsplan's inventory reader reads (no
#     other) into OUT.yaml, as the kubeconfig in $HNSPLAN_KUBECONFIG_DATA
#     (its content; a read-only identity: inventory-reader.yaml). Without
#     it (a pull request from a fork gets no secrets) or when a read fails,
#     nothing is written but OUT.yaml.skipped, the reason, which plan puts
#     in the comment; exits 0 either way.
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
#     With $HNSPLAN_INVENTORY naming inventory's OUT.yaml, the diff shows
#     who gains or loses access (the access delta); with OUT.yaml.skipped
#     there instead, the comment says why it is not shown.
#
#   sh ci/hnsplan-pr.sh codequality INTENT_DIR OUT.json
#
#     vet's findings as a GitLab code quality report (Code Climate JSON).
#     Exits 0 whether or not vet finds errors; 1 if vet cannot run.
#
#   sh ci/hnsplan-pr.sh deploy INTENT_DIR PLANS_DIR
#
#     After a merge: reads the inventory (it must succeed), compiles the
#     intent into PLANS_DIR signed with the key in $HNSPLAN_SIGN_KEY_DATA,
#     publishes it to one node (--canary 1), waits for the rollout
#     (rollout status --wait --timeout $HNSPLAN_ROLLOUT_TIMEOUT, 30m), then
#     publishes to every node and waits again, as the kubeconfig in
#     $HNSPLAN_KUBECONFIG_DATA (a publisher: deploy/rbac.yaml). A halted
#     rollout (exit 4) or one still pending at the timeout (exit 5) fails
#     with what to do.
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
	printf 'usage: %s install VERSION DIR | inventory OUT.yaml | plan INTENT_DIR BASE_REF OUT.md\n       %s codequality INTENT_DIR OUT.json | deploy INTENT_DIR PLANS_DIR\n       %s comment github|gitlab OUT.md create|update\n' "$prog" "$prog" "$prog" >&2
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
	need_hnsplan
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
	# The access delta needs the cluster's pods: the inventory step's file.
	set --
	skipped=
	if [ -n "${HNSPLAN_INVENTORY:-}" ]; then
		if [ -f "$HNSPLAN_INVENTORY" ]; then
			set -- --inventory "$HNSPLAN_INVENTORY"
		elif [ -f "$HNSPLAN_INVENTORY.skipped" ]; then
			skipped=$(head -c 2000 "$HNSPLAN_INVENTORY.skipped")
		else
			skipped="the inventory step wrote neither $HNSPLAN_INVENTORY nor its .skipped reason"
		fi
	fi
	drc=0
	hnsplan diff --color never --base "$base" "$intent" "$@" -o markdown --detailed-exitcode >"$tmp/diff.md" 2>"$tmp/diff.err" || drc=$?
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
		if [ -n "$skipped" ]; then
			printf '\n**Access delta not shown** (who gains or loses access): %s\n' "$(printf '%s' "$skipped" | tr '\n' ' ' | html_escape)"
		fi
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

need_hnsplan() {
	command -v hnsplan >/dev/null 2>&1 ||
		die "hnsplan is not on PATH: install a release with 'sh ci/hnsplan-pr.sh install VERSION DIR' and put DIR on PATH"
}

# The resources the inventory reads: exactly the kinds hnsplan's inventory
# reader (compiler/intent, Inventory.add and calicoKind) reads, each once.
# Calico's configuration and block affinities are read in their
# crd.projectcalico.org/v1 form, which every Calico cluster serves; the
# projectcalico.org/v3 API (Calico's API server, when installed) serves
# the same objects, so reading both would read each twice. A test keeps
# this list and inventory-reader.yaml in step with the reader.
inventory_resources='pods namespaces services nodes endpointslices.discovery.k8s.io
blockaffinities.crd.projectcalico.org ippools.crd.projectcalico.org ipamconfigs.crd.projectcalico.org
felixconfigurations.crd.projectcalico.org bgpconfigurations.crd.projectcalico.org
installations.operator.tigera.io'

install() {
	[ $# -eq 2 ] || usage
	version=$1
	dir=$2
	case $version in
	v[0-9]*.[0-9]*.[0-9]*) ;;
	*) die "version \"$version\": name a release, v1.2.3 (the examples pin HNSPLAN_VERSION)" ;;
	esac
	case $version in *[!A-Za-z0-9.+-]*) die "version \"$version\" has characters no release tag has" ;; esac
	case $(uname -m) in
	x86_64 | amd64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) die "no hnsplan release binary for $(uname -m): linux/amd64 and linux/arm64 are released" ;;
	esac
	command -v curl >/dev/null 2>&1 || die "curl is not on PATH"
	command -v sha256sum >/dev/null 2>&1 || die "sha256sum is not on PATH"
	url=${HNSPLAN_RELEASE_URL:-https://github.com/hnsplan/hnsplan/releases/download}/$version
	asset=hnsplan-linux-$arch
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	for f in SHA256SUMS "$asset"; do
		curl --silent --show-error --fail --location --retry 3 --max-filesize 268435456 -o "$tmp/$f" "$url/$f" ||
			die "cannot download $url/$f: is $version released, with $asset?"
	done
	# Only the asset's own line: a SHA256SUMS that lacks it fails, never
	# passes by checking nothing.
	grep -E "^[0-9a-f]{64}  $asset\$" "$tmp/SHA256SUMS" >"$tmp/sum" ||
		die "$url/SHA256SUMS lists no $asset"
	(cd "$tmp" && sha256sum -c --status sum) ||
		die "$asset does not match its SHA256SUMS line ($(cut -c1-16 "$tmp/sum")...): the download is corrupt or not the release; nothing installed"
	mkdir -p "$dir"
	chmod 755 "$tmp/$asset"
	got=$("$tmp/$asset" version 2>&1) || die "$asset version failed: $got"
	case $got in
	"hnsplan $version "* | "hnsplan $version") ;;
	*) die "$asset of release $version says \"$got\": it is not hnsplan $version; nothing installed" ;;
	esac
	mv "$tmp/$asset" "$dir/hnsplan"
	printf '%s: installed %s as %s\n' "$prog" "$got" "$dir/hnsplan" >&2
}

# use_kubeconfig WHAT: KUBECONFIG is a private file holding
# $HNSPLAN_KUBECONFIG_DATA; returns 1 when that is empty.
use_kubeconfig() {
	[ -n "${HNSPLAN_KUBECONFIG_DATA:-}" ] || return 1
	kc_dir=$(mktemp -d)
	(umask 077 && printf '%s\n' "$HNSPLAN_KUBECONFIG_DATA" >"$kc_dir/kubeconfig")
	KUBECONFIG=$kc_dir/kubeconfig
	export KUBECONFIG
}

# read_inventory OUT ERRFILE: every inventory resource the cluster serves
# into OUT, all or nothing; 1 with ERRFILE saying why and $failed naming
# the command that failed.
read_inventory() {
	out=$1
	err=$2
	failed="kubectl is not on PATH"
	command -v kubectl >/dev/null 2>&1 || {
		echo "kubectl is not on PATH" >"$err"
		return 1
	}
	# An aggregated API that is down (metrics-server) fails discovery but
	# leaves the rest listed; the kinds read here are built in or CRDs.
	failed="kubectl api-resources"
	served=$(kubectl api-resources --request-timeout=60s -o name 2>"$err") || true
	[ -n "$served" ] || return 1
	: >"$out.part"
	for r in $inventory_resources; do
		if ! printf '%s\n' "$served" | grep -qxF "$r"; then
			# Calico or its operator is not installed: nothing of it to read.
			printf '%s: the cluster serves no %s: none read\n' "$prog" "$r" >&2
			continue
		fi
		{
			printf '%s\n' '---'
			kubectl get "$r" --all-namespaces --request-timeout=60s -o yaml 2>>"$err"
		} >>"$out.part" || {
			failed="kubectl get $r"
			rm -f "$out.part"
			return 1
		}
	done
	mv "$out.part" "$out"
}

inventory() {
	[ $# -eq 1 ] || usage
	out=$1
	rm -f "$out" "$out.skipped"
	if ! use_kubeconfig; then
		printf 'no kubeconfig to read the cluster with: the secret HNSPLAN_INVENTORY_KUBECONFIG is not set for this run (pull requests from forks get no secrets)\n' >"$out.skipped"
		printf '%s: inventory skipped: %s' "$prog" "$(cat "$out.skipped")" >&2
		return 0
	fi
	trap 'rm -rf "$kc_dir"' EXIT
	if ! read_inventory "$out" "$out.err"; then
		# The comment names the command only: kubectl's message (addresses,
		# user names) stays in the job log.
		printf 'reading the cluster failed (%s); the job log has the reason\n' "$failed" >"$out.skipped"
		printf '%s: inventory skipped: ' "$prog" >&2
		cat "$out.err" >&2
		rm -f "$out.err"
		return 0
	fi
	rm -f "$out.err"
	printf '%s: inventory of %s bytes in %s\n' "$prog" "$(wc -c <"$out" | tr -d ' ')" "$out" >&2
}

codequality() {
	[ $# -eq 2 ] || usage
	intent=${1%/}
	out=$2
	need_hnsplan
	command -v jq >/dev/null 2>&1 || die "jq is not on PATH"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	vrc=0
	hnsplan vet --color never --severity warning -o json "$intent" >"$tmp/vet.json" 2>"$tmp/vet.err" || vrc=$?
	case $vrc in 0 | 1) ;; *)
		cat "$tmp/vet.err" >&2
		die "hnsplan vet -o json $intent failed (exit $vrc)"
		;;
	esac
	# Code Climate's issue format, as GitLab reads it: a fingerprint that
	# stays the same while the finding does (rule, file and message; not the
	# line, so an edit above it does not make it new).
	jq -r '.findings[] | [.rule, (.file // ""), .message] | @json' "$tmp/vet.json" |
		while IFS= read -r key; do printf '%s' "$key" | sha256sum | cut -c1-64; done >"$tmp/fp"
	jq --rawfile fp "$tmp/fp" '
		($fp | split("\n") | map(select(. != ""))) as $fps
		| [.findings | to_entries[] | .key as $i | .value
		  | {type: "issue", check_name: .rule, description: .message, categories: ["Bug Risk"],
		     severity: ({error: "critical", warning: "major", info: "info"}[.severity] // "minor"),
		     fingerprint: $fps[$i],
		     location: {path: (.file // "cluster.cue"), lines: {begin: (.line // 1)}}}]' "$tmp/vet.json" >"$out"
	printf '%s: %s findings in %s\n' "$prog" "$(jq length "$out")" "$out" >&2
}

# rollout_wait WHAT: rollout status --wait, and what to do when it fails.
rollout_wait() {
	timeout=${HNSPLAN_ROLLOUT_TIMEOUT:-30m}
	rc=0
	hnsplan rollout status --wait --timeout "$timeout" || rc=$?
	case $rc in
	0) printf '%s: %s converged\n' "$prog" "$1" >&2 ;;
	4) deploy_fail "the rollout to $1 halted (rollout status exit 4): a node holds its slot blocked or failed. 'hnsplan rollout status' names it and its last error (hnsplan.io/last-error); fix the cause, free its slot with 'hnsplan rollout resume NODE', then re-run this job. Nodes not reached yet keep their old plans." ;;
	5) deploy_fail "the rollout to $1 is still pending after $timeout (rollout status exit 5): no node halted, but not all converged. Check the agents ('kubectl -n hnsplan-system get pods -o wide', 'hnsplan rollout status'); re-run this job to keep waiting (it publishes nothing that is already published)." ;;
	*) deploy_fail "hnsplan rollout status failed (exit $rc): the cluster could not be read with this job's kubeconfig" ;;
	esac
}

deploy_fail() {
	if [ "${GITHUB_ACTIONS:-}" = true ]; then
		printf '::error title=hnsplan deploy::%s\n' "$1"
	fi
	die "$1"
}

deploy() {
	[ $# -eq 2 ] || usage
	intent=${1%/}
	plans=$2
	need_hnsplan
	[ -n "${HNSPLAN_SIGN_KEY_DATA:-}" ] ||
		deploy_fail "HNSPLAN_SIGN_KEY_DATA is empty: set the secret HNSPLAN_SIGN_KEY to the OpenSSH ed25519 private key the agents trust (ssh-keygen -t ed25519 -N '')"
	use_kubeconfig ||
		deploy_fail "HNSPLAN_KUBECONFIG_DATA is empty: set the secret HNSPLAN_DEPLOY_KUBECONFIG to a kubeconfig of the publisher (deploy/rbac.yaml, hnsplan-publisher)"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp" "$kc_dir"' EXIT
	(umask 077 && printf '%s\n' "$HNSPLAN_SIGN_KEY_DATA" >"$tmp/sign-key")
	read_inventory "$tmp/inventory.yaml" "$tmp/inventory.err" || {
		cat "$tmp/inventory.err" >&2
		deploy_fail "reading the cluster's inventory failed: the plans are compiled with it, so nothing was published"
	}
	hnsplan compile --color never "$intent" -o "$plans" --inventory "$tmp/inventory.yaml" --sign-key "$tmp/sign-key" ||
		deploy_fail "hnsplan compile $intent failed: nothing was published"
	hnsplan publish "$plans" --canary 1 ||
		deploy_fail "hnsplan publish --canary 1 failed: see above; nothing else was published"
	rollout_wait "the canary node"
	hnsplan publish "$plans" ||
		deploy_fail "hnsplan publish failed: the canary node has the new plan, the others may not"
	rollout_wait "every node"
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case $cmd in
install) install "$@" ;;
inventory) inventory "$@" ;;
plan) plan "$@" ;;
codequality) codequality "$@" ;;
deploy) deploy "$@" ;;
comment) comment "$@" ;;
*) usage ;;
esac
