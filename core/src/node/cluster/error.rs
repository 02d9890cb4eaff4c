//! What went wrong talking to the API server: setting up, the request, the answer.

/// What went wrong talking to the API server.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The credentials or the server's address cannot be used.
    #[error("{0}")]
    Setup(String),
    /// The request did not get an answer (connection refused, TLS, timeout).
    #[error("{what}: {source}")]
    Http {
        /// The request.
        what: String,
        /// The cause.
        #[source]
        source: ureq::Error,
    },
    /// The API server answered with an error.
    #[error("{what}: {code} {reason}: {message}")]
    Status {
        /// The request.
        what: String,
        /// HTTP status (410 Gone: the resource version is too old).
        code: u16,
        /// The Status's reason.
        reason: String,
        /// The Status's message.
        message: String,
    },
    /// The answer does not parse.
    #[error("{what}: {why}")]
    Decode {
        /// The request.
        what: String,
        /// The parser's complaint.
        why: String,
    },
}

impl ApiError {
    /// Whether the resource version asked for is too old (410 Gone, reason Expired).
    pub fn is_expired(&self) -> bool {
        matches!(self, ApiError::Status { code: 410, .. })
    }

    /// Whether a conditional write lost a race with another writer: 409 Conflict (a stale
    /// resourceVersion), or 422 from a JSON patch whose `test` of it failed (kube-apiserver
    /// answers every failed JSON patch operation with 422).
    pub fn is_conflict(&self) -> bool {
        matches!(
            self,
            ApiError::Status {
                code: 409 | 422,
                ..
            }
        )
    }
}
