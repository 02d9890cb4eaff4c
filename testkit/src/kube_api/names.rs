//! The syntax kube-apiserver holds names, labels and ports to (apimachinery's `IsDNS1123Label`,
//! `IsQualifiedName`, `IsValidLabelValue`, `IsValidPortName`...), with its words: each check
//! returns what is wrong, empty when nothing is.

use std::collections::BTreeMap;

use super::field_errors::{invalid, quoted};

/// The longest DNS-1123 label and label name part.
const LABEL_MAX: usize = 63;
/// The longest DNS-1123 subdomain.
const SUBDOMAIN_MAX: usize = 253;
/// The longest IANA service name.
const PORT_NAME_MAX: usize = 15;

const DNS_LABEL_ERROR: &str = "a lowercase RFC 1123 label must consist of lower case \
    alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS_LABEL_REGEX: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_ERROR: &str = "a lowercase RFC 1123 subdomain must consist of lower case \
    alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const SUBDOMAIN_REGEX: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const QUALIFIED_ERROR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and \
    must start and end with an alphanumeric character";
const QUALIFIED_REGEX: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const LABEL_VALUE_ERROR: &str = "a valid label must be an empty string or consist of \
    alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
    character";
const LABEL_VALUE_REGEX: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";

/// A namespace's name, a container's: a DNS-1123 label.
pub(super) fn dns_label(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(too_long(LABEL_MAX));
    }
    if !is_dns_label(value) {
        errors.push(regex_error(
            DNS_LABEL_ERROR,
            DNS_LABEL_REGEX,
            &["my-name", "123-abc"],
        ));
    }
    errors
}

/// A Pod's or a NetworkPolicy's name: a DNS-1123 subdomain.
pub(super) fn dns_subdomain(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        errors.push(too_long(SUBDOMAIN_MAX));
    }
    if !value.split('.').all(is_dns_label) {
        errors.push(regex_error(
            SUBDOMAIN_ERROR,
            SUBDOMAIN_REGEX,
            &["example.com"],
        ));
    }
    errors
}

/// A label key: a name part, with an optional DNS subdomain prefix and `/`.
pub(super) fn label_key(value: &str) -> Vec<String> {
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                return vec!["prefix part must be non-empty".into()];
            }
            let errors = dns_subdomain(prefix);
            if !errors.is_empty() {
                return errors.iter().map(|e| format!("prefix part {e}")).collect();
            }
            name
        }
        _ => {
            let shape = regex_error(
                QUALIFIED_ERROR,
                QUALIFIED_REGEX,
                &["MyName", "my.name", "123-abc"],
            );
            return vec![format!(
                "a qualified name {shape} with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')"
            )];
        }
    };
    let mut errors = Vec::new();
    if name.is_empty() {
        errors.push("name part must be non-empty".into());
    } else if name.len() > LABEL_MAX {
        errors.push(format!("name part {}", too_long(LABEL_MAX)));
    }
    if !is_qualified_part(name) {
        let shape = regex_error(
            QUALIFIED_ERROR,
            QUALIFIED_REGEX,
            &["MyName", "my.name", "123-abc"],
        );
        errors.push(format!("name part {shape}"));
    }
    errors
}

/// A label value: empty, or a name part.
pub(super) fn label_value(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_MAX {
        errors.push(too_long(LABEL_MAX));
    }
    if !value.is_empty() && !is_qualified_part(value) {
        errors.push(regex_error(
            LABEL_VALUE_ERROR,
            LABEL_VALUE_REGEX,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

/// What is wrong with the `labels` at `path` (`metadata.labels`, a selector's `matchLabels`),
/// as field errors.
pub(super) fn labels(path: &str, labels: &BTreeMap<String, String>) -> Vec<String> {
    let mut errors = Vec::new();
    for (key, value) in labels {
        for problem in label_key(key) {
            errors.push(invalid(path, &quoted(key), &problem));
        }
        for problem in label_value(value) {
            errors.push(invalid(path, &quoted(value), &problem));
        }
    }
    errors
}

/// A port's name: an IANA service name (RFC 6335), lower case only.
pub(super) fn port_name(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > PORT_NAME_MAX {
        errors.push(too_long(PORT_NAME_MAX));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        errors
            .push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !value.bytes().any(|b| b.is_ascii_lowercase()) {
        errors.push("must contain at least one letter (a-z)".into());
    }
    if value.contains("--") {
        errors.push("must not contain consecutive hyphens".into());
    }
    if value.starts_with('-') || value.ends_with('-') {
        errors.push("must not begin or end with a hyphen".into());
    }
    errors
}

/// A port number.
pub(super) fn port_number(value: i64) -> Vec<String> {
    if (1..=65535).contains(&value) {
        return Vec::new();
    }
    vec!["must be between 1 and 65535, inclusive".into()]
}

fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

fn is_qualified_part(value: &str) -> bool {
    let bytes = value.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

fn too_long(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// apimachinery's `RegexError`: the rule, examples, and the regular expression.
fn regex_error(message: &str, regex: &str, examples: &[&str]) -> String {
    let examples: Vec<String> = examples.iter().map(|e| format!("'{e}'")).collect();
    format!(
        "{message} (e.g. {}, regex used for validation is '{regex}')",
        examples.join(",  or ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rfc_1123() {
        assert!(dns_label("web-0").is_empty());
        for bad in ["", "Web", "-web", "web-", "a.b", &"a".repeat(64)] {
            assert!(!dns_label(bad).is_empty(), "{bad:?}");
        }
        assert!(dns_subdomain("web-0.example").is_empty());
        for bad in ["", "a..b", ".a", "A", &"a".repeat(254)] {
            assert!(!dns_subdomain(bad).is_empty(), "{bad:?}");
        }
        assert_eq!(
            dns_label("Web"),
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
              '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or \
              '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
    }

    #[test]
    fn label_keys_and_values_follow_the_label_syntax() {
        for good in [
            "app",
            "App.Name_1",
            "example.com/app",
            "kubernetes.io/metadata.name",
        ] {
            assert!(label_key(good).is_empty(), "{good:?}");
        }
        for bad in [
            "",
            "-app",
            "a/b/c",
            "/app",
            "Example.com/app",
            "example.com/",
        ] {
            assert!(!label_key(bad).is_empty(), "{bad:?}");
        }
        for good in ["", "v1", "My_value.2"] {
            assert!(label_value(good).is_empty(), "{good:?}");
        }
        for bad in ["-v", "v!", &"v".repeat(64)] {
            assert!(!label_value(bad).is_empty(), "{bad:?}");
        }
    }

    #[test]
    fn port_names_are_iana_service_names() {
        for good in ["http", "h2c", "dns-tcp", "a1"] {
            assert!(port_name(good).is_empty(), "{good:?}");
        }
        let cases: [(&str, &str); 6] = [
            (
                "",
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            ),
            (
                "HTTP",
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
            ),
            ("8080", "must contain at least one letter (a-z)"),
            ("a--b", "must not contain consecutive hyphens"),
            ("-http", "must not begin or end with a hyphen"),
            ("sixteen-letters-", "must be no more than 15 characters"),
        ];
        for (bad, why) in cases {
            assert!(
                port_name(bad).iter().any(|e| e == why),
                "{bad:?}: {:?}",
                port_name(bad)
            );
        }
        assert!(port_number(1).is_empty() && port_number(65535).is_empty());
        assert_eq!(port_number(0), ["must be between 1 and 65535, inclusive"]);
        assert!(!port_number(65536).is_empty());
    }
}
