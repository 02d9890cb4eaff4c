# The key .cargo/knid.hot names a function by: its symbol name without what changes from build to
# build. .cargo/knid-hot.sh writes the list in keys; .cargo/hot-first-link.sh matches the names in
# the objects being linked by their keys. Both take this one definition.
function key(name) {
    # The legacy scheme's hash.
    sub(/17h[0-9a-f]+E$/, "E", name)
    if (name ~ /^_R/) {
        # v0 crate disambiguators (a crate's hash differs between a release and a bench build).
        gsub(/Cs[0-9A-Za-z]+_/, "Cs_", name)
        # Back-references are offsets into the name, moved by a crate hash of another length.
        gsub(/B[0-9A-Za-z]*_/, "B_", name)
        # LLVM numbers the local copies of a function (`.1334`) anew in each build.
        sub(/\.[0-9]+$/, "", name)
    }
    return name
}
