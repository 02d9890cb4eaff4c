//! Why a guest cannot boot here, as one error type for the whole guest room.

/// Why a guest cannot boot here.
#[derive(Debug, thiserror::Error)]
pub enum GuestError {
    /// A program the guest needs is not installed.
    #[error("{tool} not found (install {package})")]
    MissingTool {
        /// The program.
        tool: &'static str,
        /// The Debian package that provides it.
        package: &'static str,
    },
    /// The kernel package could not be fetched or has not what the guest needs.
    #[error("guest kernel: {0}")]
    Kernel(String),
    /// A file or a process could not be handled.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl GuestError {
    pub(super) fn io(context: impl Into<String>, source: std::io::Error) -> GuestError {
        GuestError::Io {
            context: context.into(),
            source,
        }
    }

    /// The error and its causes on one line.
    pub fn chain(&self) -> String {
        let mut text = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            text.push_str(": ");
            text.push_str(&c.to_string());
            cause = c.source();
        }
        text
    }
}
