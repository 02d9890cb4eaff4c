#!/usr/bin/env bash
# Writes .cargo/knid.hot: the functions a running knid executes, which .cargo/hot-first-link.sh
# puts together at the start of knid's .text.
#
# Usage, as root, after `cargo build --release --bins`:  bash .cargo/knid-hot.sh
#
# It drives what a node does all day against target/release/knid, in a private network namespace,
# on the embedded default config with a 2 s reconciler period: Status and Networks, netns create,
# two attaches, ls, inspect, check, Metrics, a knid-cni ADD, CHECK and DEL, detaches, netns
# deletes, reconciler rounds and the health poll, the on-demand threads' idle exits, SIGTERM.
# It does so twice:
#  - under valgrind's callgrind, which records every function called;
#  - natively under `perf record`, for what valgrind's emulated CPU does not run: the code picked
#    by CPU features (glibc's string functions, crc32fast) and by timing (lock slow paths). The
#    page faults this records each name one function per 64 KiB the binary maps, so run the
#    script again after a relink with the new list: it then finds what is still outside.
# Functions chosen by CPU features come with their siblings for other CPUs.
#
# Each name is written without its hash (v0 crate disambiguators), so the list outlives a rebuild;
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

work=$(mktemp -d)
ns=knid-hot-$$
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    ip netns del "$ns" 2>/dev/null || true
    if [ -n "${KNID_HOT_KEEP:-}" ]; then echo "knid-hot: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
ip netns add "$ns"
in_ns() { ip netns exec "$ns" "$@"; }
{ echo 'gc_interval = "2s"'; "$bin/knid" --print-default-config; } >"$work/knid.toml"

# Runs knid under the tracer in "$@" (a command line ending in knid) and drives it: `idle` starts
# it, asks its Status and lets it idle; `day` also does what a node does all day.
drive() {
    local run=$work/$1 what=$2 sock path conf
    shift 2
    mkdir "$run"
    sock=$run/knid.sock
    ip netns exec "$ns" "$@" --config "$work/knid.toml" --socket "$sock" \
        --state-dir "$run/state" --log-level info >"$run/knid.log" 2>&1 &
    pid=$!
    ctl() { in_ns "$bin/knictl" --socket "$sock" --timeout 60 "$@"; }
    for _ in $(seq 600); do
        ctl status >/dev/null 2>&1 && break
        sleep 0.2
    done
    ctl status >/dev/null || { cat "$run/knid.log" >&2; exit 1; }
    [ "$what" = day ] && day
    sleep 35 # reconciler rounds; the reaper's, the flusher's and the handler's idle exits
    kill -TERM "$pid"
    wait "$pid" || true
    pid=
}

day() {
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
    conf="{\"cniVersion\":\"1.0.0\",\"name\":\"default\",\"type\":\"knid\",\"socket\":\"$sock\"}"
    for cmd in ADD CHECK DEL; do
        echo "$conf" | in_ns env CNI_COMMAND=$cmd CNI_CONTAINERID=hot3 CNI_NETNS="$path" \
            CNI_IFNAME=eth0 CNI_PATH=/nonexistent CNI_ARGS="K8S_POD_NAMESPACE=hot;K8S_POD_NAME=hot3" \
            "$bin/knid-cni" >/dev/null
    done
    ctl detach hot1 >/dev/null
    for pod in hot1 hot2 hot3; do ctl netns delete "$pod" >/dev/null; done
}

# Names as the list keeps them: no `'N` recursion marks, no v0 crate disambiguators.
keys() {
    sed -E "s/'[0-9]+\$//" | grep -E '^[A-Za-z_][A-Za-z0-9_.$]*$' |
        awk '/^_R/ { gsub(/Cs[0-9A-Za-z]+_/, "Cs_") } { print }'
}

# Function names from each tracer's output, for one run.
traced() {
    if [ -f "$work/$1.callgrind" ]; then
        grep -oE '^c?fn=\([0-9]+\) .+' "$work/$1.callgrind" | sed -E 's/^c?fn=\([0-9]+\) //' | keys
    fi
    # knid's own functions only (the page faults also name the kernel's, for its user copies).
    perf script -i "$work/$1.perf" --no-demangle -F ip,sym 2>/dev/null | awk '{ print $2 }' | keys |
        sort -u | comm -12 - "$work/all"
}
nm --defined-only "$bin/knid" | awk '$2 ~ /^[tTwW]$/ { print $3 }' | keys | sort -u >"$work/all"
for what in idle day; do
    drive "$what-cg" "$what" valgrind --tool=callgrind --demangle=no \
        --callgrind-out-file="$work/$what.callgrind" "$bin/knid"
    drive "$what-perf" "$what" perf record -q -o "$work/$what.perf" -e page-faults/period=1/ \
        -e cpu-clock/freq=20000/u "$bin/knid"
    traced "$what" >"$work/$what"
done

# Siblings: a function named for a CPU feature brings every variant of it.
feature='(sse[0-9_]*|ssse3|avx[0-9]*|evex[0-9]*|erms|pclmulqdq|nohw|neon)'
siblings() {
    sort -u "$1" | awk -v f="[_0-9]$feature" 'match($0, f) { print substr($0, 1, RSTART) }' |
        sort -u >"$work/stems"
    grep -F -f "$work/stems" "$work/all" | grep -E "$feature" || true
}

# Idle knid's functions first, so that an idle knid maps only those; then the rest of a day's.
out=$root/.cargo/knid.hot
{
    echo "# Functions a running knid executes (.cargo/knid-hot.sh, $(date -u +%Y-%m-%d)), without"
    echo "# their hashes, in the order .cargo/hot-first-link.sh puts them first in knid's .text:"
    echo "# what an idle knid runs, then what the rest of a day adds."
    { cat "$work/idle"; siblings "$work/idle"; } | LC_ALL=C sort -u >"$work/idle.all"
    cat "$work/idle.all"
    { cat "$work/day"; siblings "$work/day"; } | LC_ALL=C sort -u | LC_ALL=C comm -23 - "$work/idle.all"
} >"$out"
echo "knid-hot: $(grep -vc '^#' "$out") functions in $out ($(wc -l <"$work/idle.all") idle)"
