#!/usr/bin/env bash
# Writes .cargo/knid.hot: the functions a running knid executes, which .cargo/hot-first-link.sh
# puts together at the start of knid's .text.
#
# Usage, as root, after `cargo build --release --bins`:  bash .cargo/knid-hot.sh
#
# It runs target/release/knid in a private network namespace, on the embedded default config
# (with its namespace paths spelled out and an IPv4-only second network) and a 2 s reconciler
# period, three times over, each run giving one group of the list in turn:
#  - idle: start-up, Status (again once started: kubelet asks it all day), the periodic jobs,
#    the on-demand threads' idle exits, SIGTERM;
#  - day: also Networks, netns create and delete, attach, ls, inspect, check, Metrics, detach,
#    knid-cni ADD, CHECK and DEL, 96 sandboxes filled and emptied by 8 concurrent knid-cni
#    callers, and a restart with them recorded;
#  - debug: the day again at --log-level debug;
#  - cluster: idle in cluster mode, watching 1,000 Nodes of testkit's stand-in API server
#    (testkit/examples/kube_standin.rs, built here), its pod network's CIDR read from its Node.
# The list puts them in the order steady (what the idle run runs once start-up is over: the
# code knid maps back after it unmaps its binary's pages at the end of start-up, netops/src/
# code_pages.rs), cluster steady (what the cluster run runs once its 1,000 Nodes are routed:
# the route resync, the watches' bookmarks, the publisher's rounds; what maps back after the
# release that follows a big change of the Nodes), idle (start-up), cluster, day, debug.
# Each run is traced twice:
#  - under valgrind's callgrind, which records every function called;
#  - natively under `perf record`, for what valgrind's emulated CPU does not run: the code picked
#    by CPU features (glibc's string functions, crc32fast) and by timing (lock slow paths). The
#    page faults this records each name one function per 64 KiB the binary maps, so run the
#    script again after a relink with the new list: it then finds what is still outside.
# Functions chosen by CPU features come with their siblings for other CPUs.
#
# Each name is written as .cargo/hot-key.awk keys it (without its hashes, the v0 back-references
# they move and LLVM's numbers of local copies), so the list outlives a rebuild;
# run this again when the code knid runs changes much (idle RSS in `cargo bench --bench perf`
# grows back toward the whole text when the list is stale). KNID_HOT_KEEP=1 keeps the work dir.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin=${KNID_HOT_TARGET:-$root/target/release}
for b in knid knictl knid-cni; do
    [ -x "$bin/$b" ] || { echo "knid-hot: $bin/$b missing: cargo build --release --bins" >&2; exit 1; }
done
for tool in valgrind perf nm; do
    command -v "$tool" >/dev/null || { echo "knid-hot: needs $tool" >&2; exit 1; }
done

# The stand-in API server of the cluster run (not traced: a debug build will do).
(cd "$root" && cargo build -q -p testkit --example kube_standin)
standin_bin=${CARGO_TARGET_DIR:-$root/target}/debug/examples/kube_standin

work=$(mktemp -d)
ns=knid-hot-$$
pid=
api=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    [ -n "$api" ] && kill "$api" 2>/dev/null && wait "$api" 2>/dev/null
    for n in "$ns" /run/netns/knid-hot* /run/netns/knid-burst*; do
        [ -e "/run/netns/${n##*/}" ] && ip netns del "${n##*/}" 2>/dev/null
    done
    if [ -n "${KNID_HOT_KEEP:-}" ]; then echo "knid-hot: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
# Killed, it still cleans up: bash runs no EXIT trap when a signal ends it.
trap 'exit 130' INT
trap 'exit 143' TERM
ip netns add "$ns"
in_ns() { ip netns exec "$ns" "$@"; }
# The embedded default config, with what most deployments add: the namespace paths spelled out
# (their defaults) and a second, IPv4-only network, so that the code reading them is listed too.
{
    echo 'gc_interval = "2s"'
    echo 'netns_dir = "/run/netns"'
    echo 'netns_prefixes = ["/run/netns/", "/var/run/netns/", "/proc/"]'
    "$bin/knid" --print-default-config
    printf '\n[networks.v4]\nbridge = "knidv4"\nsubnets = ["10.87.0.0/16"]\n'
} >"$work/knid.toml"

# Starts knid under tracer $1 (callgrind or perf) for run $2 with log level $3, on state dir
# $run/state; each start writes its own trace ($work/$2.<tracer>.<n>).
launch() {
    local tracer=$1 name=$2 level=$3 n
    n=$(find "$work" -maxdepth 1 -name "$name.$tracer.*" | wc -l)
    local out=$work/$name.$tracer.$n trace
    case $tracer in
    # --fair-sched: valgrind runs one thread at a time, and by default a thread that spins
    # (sled's I/O threads wait for the lazily made queue that the thread spawning them is still
    # making) can keep it from the others for minutes: start-up then outlasts the wait below.
    callgrind) trace=(valgrind --tool=callgrind --fair-sched=yes --demangle=no --callgrind-out-file="$out") ;;
    perf) trace=(perf record -q -o "$out" -e page-faults/period=1/ -e cpu-clock/freq=20000/u) ;;
    esac
    # nsenter, not `ip netns exec`: the netns knid creates must outlive it, for the restart.
    # knid's own glibc tunables (netops/src/malloc.rs), set here: without every one of them knid
    # execs itself to set them, and valgrind does not follow an exec (its trace is then empty,
    # which `traced` refuses).
    GLIBC_TUNABLES=glibc.malloc.tcache_max=128:glibc.pthread.stack_cache_size=0 \
        nsenter --net="/run/netns/$ns" -- "${trace[@]}" "$bin/knid" --config "${config:-$work/knid.toml}" --socket "$sock" \
        --state-dir "$run/state" --log-level "$level" >>"$run/knid.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        ctl status >/dev/null 2>&1 && return
        sleep 0.2
    done
    cat "$run/knid.log" >&2
    exit 1
}

stop() {
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

# One run of knid under tracer $1, named $2: `idle` starts knid, asks its Status and lets it idle;
# `day` (log level info) and `debug` (the same at debug) also do what a node does all day, with a
# restart while pods are attached; `cluster` idles in cluster mode ([`standin`]).
drive() {
    local tracer=$1 name=$2 level=info run=$work/$2-$1 sock path conf
    [ "$name" = debug ] && level=debug
    mkdir "$run"
    sock=$run/knid.sock
    config=
    [ "$name" = cluster ] && standin "$run"
    launch "$tracer" "$name" "$level"
    if [ "$name" = idle ] && [ "$tracer" = callgrind ]; then
        # Start-up's calls go to a file of their own (`.1`); what follows is what an idle knid
        # runs for good (`steady`).
        sleep 5
        callgrind_control -d startup "$pid" >/dev/null
    fi
    if [ "$name" = idle ]; then
        # The Status a supervisor (kubelet through the runtime) asks all day: steady, so that
        # the first one after start-up's release maps a few pages, not the start-up group's.
        for _ in 1 2 3; do
            ctl status >/dev/null
            sleep 1
        done
    fi
    if [ "$name" = cluster ] && [ "$tracer" = callgrind ]; then
        # The same split once every Node is routed (`cluster_steady`).
        for _ in $(seq 600); do
            [ "$(in_ns ip route show proto 107 | wc -l)" -ge 1000 ] && break
            sleep 0.2
        done
        sleep 2
        callgrind_control -d startup "$pid" >/dev/null
    fi
    if [ "$name" = day ] || [ "$name" = debug ]; then
        ctl networks >/dev/null
        for pod in hot1 hot2; do
            path=$(ctl netns create "$pod" | grep -o '/[^ ]*' | head -1)
            ctl attach --netns "$path" "$pod" >/dev/null
        done
        ctl ls >/dev/null
        ctl inspect hot1 >/dev/null
        ctl check hot1 >/dev/null
        ctl metrics >/dev/null
        path=$(ctl netns create hot3 | grep -o '/[^ ]*' | head -1)
        cni ADD hot3
        burst ADD
        sleep 5 # a reconciler round with pods attached
        stop
        launch "$tracer" "$name" "$level"
        cni CHECK hot3
        cni DEL hot3
        burst DEL
        ctl detach hot1 >/dev/null
        for pod in hot1 hot2 hot3; do ctl netns delete "$pod" >/dev/null; done
    fi
    sleep 35 # reconciler rounds; the reaper's, the flusher's and the handler's idle exits
    # Cluster mode's rounds a minute apart: the publisher's read of its Node, the bookmarks.
    [ "$name" = cluster ] && sleep 35
    stop
    if [ -n "$api" ]; then
        kill "$api" && wait "$api" 2>/dev/null || true
        api=
        in_ns ip link del eth0
    fi
}
# The stand-in API server for a cluster run in dir $1, with Node `hot`'s addresses on an `eth0`
# of knid's netns (a veth: not every kernel has the dummy driver), and knid's config for it
# ($config).
standin() {
    local line ready=
    in_ns ip link set lo up
    # exec: $api is the stand-in itself.
    coproc STANDIN { exec ip netns exec "$ns" "$standin_bin" "$1" 1000; }
    api=$STANDIN_PID
    in_ns ip link add eth0 type veth peer name eth0-peer
    while read -r line <&"${STANDIN[0]}"; do
        case $line in
        ADDR\ *) in_ns ip addr add "${line#ADDR }" dev eth0 ;;
        READY)
            ready=1
            break
            ;;
        esac
    done
    [ -n "$ready" ] || { echo "knid-hot: the stand-in API server did not start" >&2; exit 1; }
    in_ns ip link set eth0-peer up
    in_ns ip link set eth0 up
    config=$1/cluster.toml
    {
        cat "$work/knid.toml"
        printf '\n[cluster]\nenabled = true\nnode_name = "hot"\nkubeconfig = "%s"\n' "$1/kubeconfig"
        printf '\n[networks.pod]\nkind = "bridge"\nbridge = "kpod0"\npod_cidr_from_node = true\n'
    } >"$config"
}
ctl() { in_ns "$bin/knictl" --socket "$sock" --timeout 60 "$@"; }
# knid-cni's $1 for sandbox $2 in netns $path (or $3).
cni() {
    conf="{\"cniVersion\":\"1.0.0\",\"name\":\"default\",\"type\":\"knid\",\"socket\":\"$sock\"}"
    echo "$conf" | in_ns env CNI_COMMAND="$1" CNI_CONTAINERID="$2" CNI_NETNS="${3:-$path}" \
        CNI_IFNAME=eth0 CNI_PATH=/nonexistent CNI_ARGS="K8S_POD_NAMESPACE=hot;K8S_POD_NAME=$2" \
        "$bin/knid-cni" >/dev/null
}
# knid-cni's $1 for 8 x 12 sandboxes, 8 at a time, in netns of knid's (ADD creates them, DEL
# deletes them): what many pods and concurrent callers run.
burst() {
    local c i id pids=()
    for c in 1 2 3 4 5 6 7 8; do
        for i in $(seq 12); do
            id=burst$c-$i
            if [ "$1" = ADD ]; then
                cni ADD "$id" "$(ctl netns create "$id" | grep -o '/[^ ]*' | head -1)"
            else
                cni DEL "$id" "/run/netns/knid-$id"
                ctl netns delete "$id" >/dev/null
            fi
        done &
        pids+=($!)
    done
    wait "${pids[@]}"
}

# Names as the list keeps them: no `'N` recursion marks, and in .cargo/hot-key.awk's keys
# (without what changes from build to build: hashes, v0 back-references, LLVM copy numbers).
keys() {
    sed -E "s/'[0-9]+\$//" | grep -E '^[A-Za-z_][A-Za-z0-9_.$]*$' |
        awk "$(cat "$root/.cargo/hot-key.awk")"' { print key($0) }'
}

# The functions a callgrind trace $1 names, keyed.
called() {
    grep -oE '^c?fn=\([0-9]+\) .+' "$1" | sed -E 's/^c?fn=\([0-9]+\) //' | keys
}

# What an idle knid runs once start-up is over: its callgrind trace after the dump at ready.
steady() {
    local f
    for f in "$work"/idle.callgrind.[0-9]; do
        called "$f"
    done
}

# What an idle knid in cluster mode runs once its Nodes are routed: the cluster run's callgrind
# trace after its dump.
cluster_steady() {
    local f
    for f in "$work"/cluster.callgrind.[0-9]; do
        called "$f"
    done
}

# Function names from each run's traces.
traced() {
    local f
    for f in "$work/$1".callgrind.*; do
        grep -q '^fn=' "$f" || { echo "knid-hot: $f traced no function (did knid exec itself?)" >&2; exit 1; }
        called "$f"
    done
    # knid's own functions only (the page faults also name the kernel's, for its user copies).
    for f in "$work/$1".perf.*; do
        perf script -i "$f" --no-demangle -F ip,sym 2>/dev/null | awk '{ print $2 }' | keys |
            sort -u | comm -12 - "$work/all"
    done
}
nm --defined-only "$bin/knid" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | keys | sort -u >"$work/all"
for name in idle cluster day debug; do
    drive callgrind "$name"
    drive perf "$name"
    traced "$name" >"$work/$name"
done
steady >"$work/steady"
cluster_steady >"$work/cluster_steady"

# Siblings: a function named for a CPU feature brings every variant of it.
feature='(sse[0-9_]*|ssse3|avx[0-9]*|evex[0-9]*|erms|pclmulqdq|nohw|neon)'
siblings() {
    sort -u "$1" | awk -v f="[_0-9]$feature" 'match($0, f) { print substr($0, 1, RSTART) }' |
        sort -u >"$work/stems"
    grep -F -f "$work/stems" "$work/all" | grep -E "$feature" || true
}

# Idle knid's functions first, so that an idle knid maps only those; then the rest of a day's;
# then what only debug logging runs.
out=$root/.cargo/knid.hot
group() {
    { cat "$work/$1"; siblings "$work/$1"; } | LC_ALL=C sort -u | LC_ALL=C comm -23 - "$work/listed" |
        tee -a "$work/listed.new"
    LC_ALL=C sort -u "$work/listed" "$work/listed.new" -o "$work/listed"
    : >"$work/listed.new"
}
: >"$work/listed"
{
    echo "# Functions a running knid executes (.cargo/knid-hot.sh, $(date -u +%Y-%m-%d)), without"
    echo "# their hashes, in the order .cargo/hot-first-link.sh puts them first in knid's .text:"
    echo "# what an idle knid runs once started, then what an idle knid in cluster mode adds once its"
    echo "# Nodes are routed, then what start-up adds, then what cluster mode's start-up adds, then"
    echo "# what the rest of a day adds, then what debug logging adds."
    for name in steady cluster_steady idle cluster day debug; do
        group "$name"
    done
} >"$out"
echo "knid-hot: $(grep -vc '^#' "$out") functions in $out"
