#!/bin/sh
# Cargo runs rustc for the workspace's own crates through this script (.cargo/config.toml):
# "$1" is rustc, the rest its arguments. It links knid, knictl and knid-cni with glibc
# statically (-C target-feature=+crt-static), and leaves every other crate alone.
#
# Why: knid-cni is exec'd once per CNI call, and loading libc.so and libgcc_s.so cost it
# ~0.3 ms of its ~0.8 ms start (docs/performance-history.md); knid maps 1.2 MiB less of libc.so. The
# reference CNI plugins are static binaries for the same reason, and a static knid-cni runs on
# any node's host. None of the three uses NSS or dlopen.
#
# Why a wrapper: Cargo has no per-binary rustflags on stable, and +crt-static in RUSTFLAGS
# also reaches proc-macro crates, which rustc then refuses to build.
#
# Without a static glibc (Fedora's glibc-static not installed) the binaries link dynamically.
rustc=$1
shift
crate=
bin=
prev=
for arg in "$@"; do
    case "$prev" in
    --crate-name) crate=$arg ;;
    --crate-type) [ "$arg" = bin ] && bin=1 ;;
    esac
    prev=$arg
done
# knid itself also links through hot-first-link.sh, which puts the functions a running knid
# executes first in .text (see there), unless a linker was chosen already.
if [ "$crate" = knid ] && [ -n "$bin" ]; then
    case " $* " in
    *linker=*) ;;
    *)
        here=$(cd "$(dirname "$0")" && pwd)
        export KNID_HOT_LIST="$here/knid.hot"
        set -- "$@" -C "linker=$here/hot-first-link.sh"
        ;;
    esac
fi
case "$crate" in
knid | knictl | knid_cni)
    if [ -n "$bin" ] && [ -f "$(cc -print-file-name=libc.a)" ]; then
        exec "$rustc" "$@" -C target-feature=+crt-static
    fi
    ;;
esac
exec "$rustc" "$@"
