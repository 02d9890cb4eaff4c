//! Validation errors worded as kube-apiserver's (`field.Error`): the field path, the kind of
//! problem, the value as Go prints it, and a detail; and the 422 message they add up to.

/// `path: Invalid value: value: detail`; `value` as [`quoted`] or a number.
pub(super) fn invalid(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {value}: {detail}")
}

/// `path: Required value`, with `: detail` when there is one.
pub(super) fn required(path: &str, detail: &str) -> String {
    with_detail(format!("{path}: Required value"), detail)
}

/// `path: Forbidden: detail`.
pub(super) fn forbidden(path: &str, detail: &str) -> String {
    with_detail(format!("{path}: Forbidden"), detail)
}

/// `path: Unsupported value: value: supported values: "A", "B"`.
pub(super) fn not_supported(path: &str, value: &str, supported: &[&str]) -> String {
    let supported: Vec<String> = supported.iter().map(|s| quoted(s)).collect();
    format!(
        "{path}: Unsupported value: {value}: supported values: {}",
        supported.join(", ")
    )
}

/// A string value as Go's `%q` prints it.
pub(super) fn quoted(value: &str) -> String {
    format!("{value:?}")
}

/// The message of the 422 Invalid answer to a write of object `name` of `kind` (`Pod`,
/// `NetworkPolicy.networking.k8s.io`) refused for `errors` (at least one).
pub(super) fn invalid_object(kind: &str, name: &str, errors: &[String]) -> String {
    let errors = match errors {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    };
    format!("{kind} {} is invalid: {errors}", quoted(name))
}

fn with_detail(mut message: String, detail: &str) -> String {
    if !detail.is_empty() {
        message.push_str(": ");
        message.push_str(detail);
    }
    message
}
