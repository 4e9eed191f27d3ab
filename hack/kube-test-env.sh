#!/usr/bin/env bash
# kube-test-env.sh — a real kube-apiserver and etcd on 127.0.0.1 for the
# integration tests (`make test-integration`). Both are built from source
# through the Go module proxy, once per version, and cached: no release
# downloads and no containers, because the proxy is the one network
# service CI and the development machines are guaranteed to reach.
#
# Needs: go (at least the `go` line of k8s.io/kubernetes' go.mod), openssl
# (the serving and service-account keys) and curl (the readiness probes).
#
# Usage:
#   hack/kube-test-env.sh build   build kube-apiserver and etcd (no-op when cached)
#   hack/kube-test-env.sh start   build if needed, start both, write $KAS_RUN_DIR/kubeconfig
#   hack/kube-test-env.sh env     print the export line for KUBECONFIG
#   hack/kube-test-env.sh stop    stop the two servers `start` started (by their PIDs)
#
# Environment (all optional):
#   KAS_K8S_VERSION    kube-apiserver version                  (default 1.37.1)
#   KAS_ETCD_VERSION   etcd version, or "system" for the etcd on PATH (default 3.7.3)
#   KAS_CACHE          sources and binaries  (default ${XDG_CACHE_HOME:-$HOME/.cache}/real-apiserver)
#   KAS_RUN_DIR        certs, etcd data, logs, PIDs, kubeconfig (default ./.tmp/real-apiserver)
#   KAS_ETCD_PORT, KAS_APISERVER_PORT   fixed ports instead of free random ones
#   KAS_START_TIMEOUT  seconds to wait for /readyz             (default 120)
# No ETCD_* names on purpose: etcd reads every ETCD_* variable as a flag.
#
# The binaries land in $KAS_CACHE/kube-apiserver-v<version>/ and
# $KAS_CACHE/etcd-v<version>/ (about 145 MB together); cache $KAS_CACHE in
# CI keyed on this file's hash. A cold build takes minutes.
set -euo pipefail

KAS_K8S_VERSION=${KAS_K8S_VERSION:-1.37.1}
KAS_ETCD_VERSION=${KAS_ETCD_VERSION:-3.7.3}
KAS_CACHE=${KAS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/real-apiserver}
KAS_RUN_DIR=${KAS_RUN_DIR:-$PWD/.tmp/real-apiserver}
KAS_START_TIMEOUT=${KAS_START_TIMEOUT:-120}
APISERVER=$KAS_CACHE/kube-apiserver-v$KAS_K8S_VERSION/kube-apiserver
ETCD=$KAS_CACHE/etcd-v$KAS_ETCD_VERSION/etcd

log() { printf '[kube-test-env] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The wrapper modules below are throw-away: they must not pick up a
# go.work or -mod=vendor of the caller, and must resolve through the proxy.
# CGO off, as upstream's release builds, gives static binaries that survive
# a change of the CI runner's image under a restored cache.
gowrap() { GOWORK=off GOFLAGS=-mod=mod CGO_ENABLED=${CGO_ENABLED:-0} go "$@"; }

build_kube_apiserver() {
	[[ -x $APISERVER ]] && { log "cached: $APISERVER"; return; }
	local src minor patch staging k8smod m
	src=$(dirname "$APISERVER")/src
	minor=$(cut -d. -f2 <<<"$KAS_K8S_VERSION")
	patch=$(cut -d. -f3 <<<"$KAS_K8S_VERSION")
	staging="v0.$minor.$patch"
	mkdir -p "$src"
	cat >"$src/main.go" <<'EOF'
// Command kube-apiserver wraps the upstream kube-apiserver command.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
EOF
	# k8s.io/kubernetes is not meant to be imported: its go.mod replaces
	# every k8s.io staging module with ./staging/src/..., which a dependent
	# module cannot see. Mirror that replace list onto the published tags
	# of the staging modules (v0.<minor>.<patch>), which are the same code.
	k8smod=$(cd "$src" && gowrap mod download -json "k8s.io/kubernetes@v$KAS_K8S_VERSION" |
		sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
	[[ -f $k8smod ]] || die "cannot download the go.mod of k8s.io/kubernetes@v$KAS_K8S_VERSION through the module proxy"
	{
		printf 'module example.local/kube-apiserver\n\ngo %s\n\n' "$(sed -n 's/^go \([0-9.]*\).*/\1/p' "$k8smod")"
		printf 'require k8s.io/kubernetes v%s\n\nreplace (\n' "$KAS_K8S_VERSION"
		for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[^ ]*\) => ./staging/.*#\1#p' "$k8smod"); do
			# Staging modules k8s.io/kubernetes does not require (the
			# sample-* ones) have no published tag to replace with.
			grep -q "^[[:space:]]*$m v0.0.0" "$k8smod" || continue
			printf '\t%s => %s %s\n' "$m" "$m" "$staging"
		done
		printf ')\n'
	} >"$src/go.mod"
	log "resolving modules for kube-apiserver v$KAS_K8S_VERSION (staging $staging)"
	(cd "$src" && gowrap mod tidy)
	log "building kube-apiserver (a cold build takes minutes)"
	# The version the server reports (/version, and the client's skew
	# checks) comes from these variables; unset they read v0.0.0.
	local ld="-s -w" p
	for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		ld+=" -X $p.gitVersion=v$KAS_K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
	done
	# Build to a temporary name so an interrupted build is never cached.
	(cd "$src" && gowrap build -trimpath -ldflags "$ld" -o "$APISERVER.tmp" . && mv "$APISERVER.tmp" "$APISERVER")
	log "built $APISERVER"
}

build_etcd() {
	if [[ $KAS_ETCD_VERSION == system ]]; then
		ETCD=$(command -v etcd) || die "KAS_ETCD_VERSION=system but there is no etcd on PATH (apt-get install etcd-server)"
		return
	fi
	[[ -x $ETCD ]] && { log "cached: $ETCD"; return; }
	local src
	src=$(dirname "$ETCD")/src
	mkdir -p "$src"
	cat >"$src/main.go" <<'EOF'
// Command etcd wraps the upstream etcd server (go.etcd.io/etcd/server/v3).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
	printf 'module example.local/etcd\n\ngo 1.24\n' >"$src/go.mod"
	log "resolving modules for etcd v$KAS_ETCD_VERSION"
	(cd "$src" && gowrap get "go.etcd.io/etcd/server/v3@v$KAS_ETCD_VERSION" && gowrap mod tidy)
	log "building etcd"
	(cd "$src" && gowrap build -trimpath -ldflags "-s -w" -o "$ETCD.tmp" . && mv "$ETCD.tmp" "$ETCD")
	log "built $ETCD"
}

# One build at a time per cache: several test runs started together (make
# test-integration in two checkouts) would otherwise each compile the same
# few thousand packages, all at once; the later ones wait and find the
# binaries cached.
cmd_build() {
	mkdir -p "$KAS_CACHE"
	if command -v flock >/dev/null 2>&1; then
		exec 9>"$KAS_CACHE/.build.lock"
		flock 9
	fi
	build_etcd
	build_kube_apiserver
	if command -v flock >/dev/null 2>&1; then exec 9>&-; fi
}

# free_port picks a random port nothing listens on. Best effort: another
# process may take it before the server binds, and start then fails loudly.
free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 12000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
	done
	die "no free port on 127.0.0.1 after 50 tries; set KAS_ETCD_PORT and KAS_APISERVER_PORT"
}

# gen_certs writes a CA, the API server's serving certificate (valid for
# the names clients in and outside a cluster use) and the service-account
# signing key pair.
gen_certs() {
	local d=$1
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=kube-test-env-ca" \
		-keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
	openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
		-keyout "$d/apiserver.key" -out "$d/apiserver.csr" 2>/dev/null
	printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc,IP:10.0.0.1\nextendedKeyUsage=serverAuth\n' >"$d/ext.cnf"
	openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
		-days 3650 -extfile "$d/ext.cnf" -out "$d/apiserver.crt" 2>/dev/null
	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
	openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null
}

# wait_url polls url until it answers 2xx or timeout seconds pass.
wait_url() {
	local url=$1 t=$2
	shift 2
	local deadline=$((SECONDS + t))
	until curl -sf -o /dev/null "$@" "$url"; do
		((SECONDS < deadline)) || return 1
		sleep 0.1
	done
}

cmd_start() {
	[[ ! -f $KAS_RUN_DIR/kube-apiserver.pid ]] ||
		die "$KAS_RUN_DIR/kube-apiserver.pid exists: a server may still run; run '$0 stop' first"
	cmd_build
	mkdir -p "$KAS_RUN_DIR"
	local certs=$KAS_RUN_DIR/certs etcd_port=${KAS_ETCD_PORT:-$(free_port)} kas_port=${KAS_APISERVER_PORT:-$(free_port)}
	local token
	token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	gen_certs "$certs"
	# One static token in system:masters: the tests act as cluster admin
	# and create their own narrower identities where they test RBAC.
	printf '%s,admin,admin-uid,"system:masters"\n' "$token" >"$certs/tokens.csv"
	rm -rf "$KAS_RUN_DIR/etcd-data"

	# fsync is what makes a throw-away etcd slow on CI disks; skip it where
	# the etcd build supports that (the system one may not).
	local etcd_extra=()
	if "$ETCD" --help 2>&1 | grep -q -- --unsafe-no-fsync; then etcd_extra+=(--unsafe-no-fsync); fi
	# etcd treats every ETCD_<FLAG> environment variable as a flag
	# (ETCD_VERSION=x becomes --version=x and aborts start-up).
	local unset_etcd=() v
	for v in $(compgen -e | grep '^ETCD_' || true); do unset_etcd+=(-u "$v"); done
	local t0=$SECONDS
	env "${unset_etcd[@]}" "$ETCD" --data-dir="$KAS_RUN_DIR/etcd-data" \
		--listen-client-urls="http://127.0.0.1:$etcd_port" --advertise-client-urls="http://127.0.0.1:$etcd_port" \
		--listen-peer-urls="http://127.0.0.1:0" --log-level=warn "${etcd_extra[@]}" \
		>"$KAS_RUN_DIR/etcd.log" 2>&1 &
	echo $! >"$KAS_RUN_DIR/etcd.pid"
	wait_url "http://127.0.0.1:$etcd_port/health" 30 ||
		{ cat "$KAS_RUN_DIR/etcd.log" >&2; cmd_stop; die "etcd did not become healthy within 30s (log above)"; }
	log "etcd up on 127.0.0.1:$etcd_port (pid $(cat "$KAS_RUN_DIR/etcd.pid"))"

	# No controller-manager runs, so no ServiceAccount admission (it would
	# wait for token controllers) and no endpoint reconciler (nothing
	# reaches this server through a Service).
	"$APISERVER" \
		--etcd-servers="http://127.0.0.1:$etcd_port" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$kas_port" \
		--tls-cert-file="$certs/apiserver.crt" --tls-private-key-file="$certs/apiserver.key" \
		--cert-dir="$certs" \
		--token-auth-file="$certs/tokens.csv" \
		--authorization-mode=RBAC \
		--service-account-issuer="https://127.0.0.1:$kas_port" \
		--service-account-key-file="$certs/sa.pub" --service-account-signing-key-file="$certs/sa.key" \
		--service-cluster-ip-range=10.0.0.0/24 \
		--disable-admission-plugins=ServiceAccount \
		--endpoint-reconciler-type=none \
		--allow-privileged=true \
		>"$KAS_RUN_DIR/kube-apiserver.log" 2>&1 &
	echo $! >"$KAS_RUN_DIR/kube-apiserver.pid"
	if ! wait_url "https://127.0.0.1:$kas_port/readyz" "$KAS_START_TIMEOUT" --cacert "$certs/ca.crt" -H "Authorization: Bearer $token"; then
		tail -n 40 "$KAS_RUN_DIR/kube-apiserver.log" >&2
		cmd_stop
		die "kube-apiserver not ready within ${KAS_START_TIMEOUT}s (log above; raise KAS_START_TIMEOUT on a slow machine)"
	fi
	log "kube-apiserver ready on https://127.0.0.1:$kas_port (pid $(cat "$KAS_RUN_DIR/kube-apiserver.pid"), $((SECONDS - t0))s after etcd started)"

	cat >"$KAS_RUN_DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: kube-test-env
  cluster:
    server: https://127.0.0.1:$kas_port
    certificate-authority-data: $(base64 -w0 <"$certs/ca.crt")
users:
- name: admin
  user:
    token: $token
contexts:
- name: kube-test-env
  context: {cluster: kube-test-env, user: admin}
current-context: kube-test-env
EOF
	cmd_env
}

cmd_env() { echo "export KUBECONFIG=$KAS_RUN_DIR/kubeconfig"; }

# stop_pid stops the server whose PID file `start` wrote: TERM, up to 10s
# to exit, then KILL. Only that PID, never a process found by name.
stop_pid() {
	local f=$KAS_RUN_DIR/$1.pid pid
	[[ -f $f ]] || return 0
	pid=$(cat "$f")
	if kill -0 "$pid" 2>/dev/null; then
		kill "$pid"
		for _ in $(seq 1 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
		log "stopped $1 (pid $pid)"
	fi
	rm -f "$f"
}

cmd_stop() {
	stop_pid kube-apiserver
	stop_pid etcd
	rm -rf "$KAS_RUN_DIR/etcd-data"
}

case ${1:-} in
build) cmd_build ;;
start) cmd_start ;;
stop) cmd_stop ;;
env) cmd_env ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' >&2
	exit 2
	;;
esac
