#!/bin/sh
# The linker rustc runs for the knid binary (.cargo/static-bins.sh sets it): cc with rustc's own
# arguments, plus lld's --symbol-ordering-file naming the functions in $KNID_HOT_LIST (.cargo/
# knid.hot) so that they sit together at the start of .text.
#
# Why: the kernel maps a binary's pages 64 KiB at a time (fault-around), so start-up code spread
# over 7.5 MB of text leaves most of it in knid's RSS for good. Put together, idle knid's functions
# first, an idle knid maps ~2.4 MB of its text instead of ~5.2 (docs/performance-history.md).
#
# The list holds symbol names as .cargo/hot-key.awk keys them: without what changes from build
# to build (legacy `17h<hash>E`, v0 crate disambiguators, the v0 back-references those move,
# LLVM's numbers of local copies; a release and a bench build name their crates differently).
# This script matches them against the keys of the names in the objects being linked. A name
# that is no longer there is skipped, so a stale list costs memory, never a build.
# .cargo/knid-hot.sh makes the list.
list=${KNID_HOT_LIST:-}
case " $* " in
*" -fuse-ld=lld "*) ;;
*) list= ;; # --symbol-ordering-file is lld's
esac
if [ -z "$list" ] || [ ! -f "$list" ] || ! command -v nm >/dev/null 2>&1; then
    exec cc "$@"
fi
order=$(mktemp) || exec cc "$@"
for arg in "$@"; do
    case "$arg" in
    *.o) nm --defined-only "$arg" 2>/dev/null ;;
    esac
done | awk -v list="$list" "$(cat "$(dirname "$0")/hot-key.awk")"'
    BEGIN {
        while ((getline line < list) > 0)
            if (line != "" && line !~ /^#/) rank[line] = ++n
    }
    $2 ~ /^[tTwW]$/ { k = key($3); if (k in rank) print rank[k], $3 }
    # C functions (glibc, ring) have no hash: their names go to lld as they are.
    END { for (k in rank) if (k !~ /^_(ZN|R)/) print rank[k], k }
' | sort -n -s -k1,1 | cut -d' ' -f2 >"$order"
cc "$@" "-Wl,--symbol-ordering-file=$order" -Wl,--no-warn-symbol-ordering
status=$?
rm -f "$order"
exit $status
