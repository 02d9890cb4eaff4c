//! Object keys matched the way Go's `encoding/json` matches them when it decodes into a struct,
//! which is how every Go plugin reads its configuration: the exact key if present, else any key
//! equal to it ignoring case. Runtimes rely on it without knowing: go-cni (containerd's CRI)
//! marshals its capability structs without JSON tags, so `portMappings` arrives as
//! `[{"HostPort":8080,"ContainerPort":80,"Protocol":"tcp","HostIP":""}]` and `dns` as
//! `{"Servers":[…],"Searches":[…],"Options":[…]}`. Go folds a few non-ASCII letters too (the
//! Kelvin sign, the long s); no runtime sends those in a key, so ASCII folding is what is done.

use serde_json::{Map, Value};

/// The value of `key` in `obj` as Go would find it for a struct field of that name: the exact
/// key, else the first key (in order) equal to it ignoring ASCII case.
pub(super) fn field<'a>(obj: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    obj.get(key).or_else(|| {
        obj.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, v)| v)
    })
}

#[cfg(test)]
mod tests;
