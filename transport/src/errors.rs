//! The one place knid errors become ttrpc statuses (the table of docs/api.md#error-codes).

use knid_core::{Error, ErrorKind};
use ttrpc::Code;

/// The ttrpc status code of an error kind.
pub fn code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::InvalidArgument => Code::INVALID_ARGUMENT,
        ErrorKind::NotFound => Code::NOT_FOUND,
        ErrorKind::AlreadyExists => Code::ALREADY_EXISTS,
        ErrorKind::FailedPrecondition => Code::FAILED_PRECONDITION,
        ErrorKind::ResourceExhausted => Code::RESOURCE_EXHAUSTED,
        ErrorKind::Unavailable => Code::UNAVAILABLE,
        ErrorKind::DeadlineExceeded => Code::DEADLINE_EXCEEDED,
        ErrorKind::Internal => Code::INTERNAL,
    }
}

/// The canonical (gRPC) name of a code, as operators know it: `NotFound`, `InvalidArgument`, ...
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::OK => "OK",
        Code::CANCELLED => "Cancelled",
        Code::UNKNOWN => "Unknown",
        Code::INVALID_ARGUMENT => "InvalidArgument",
        Code::DEADLINE_EXCEEDED => "DeadlineExceeded",
        Code::NOT_FOUND => "NotFound",
        Code::ALREADY_EXISTS => "AlreadyExists",
        Code::PERMISSION_DENIED => "PermissionDenied",
        Code::RESOURCE_EXHAUSTED => "ResourceExhausted",
        Code::FAILED_PRECONDITION => "FailedPrecondition",
        Code::ABORTED => "Aborted",
        Code::OUT_OF_RANGE => "OutOfRange",
        Code::UNIMPLEMENTED => "Unimplemented",
        Code::INTERNAL => "Internal",
        Code::UNAVAILABLE => "Unavailable",
        Code::DATA_LOSS => "DataLoss",
        Code::UNAUTHENTICATED => "Unauthenticated",
    }
}

/// `err` as a ttrpc status: the code of its kind, the one-line cause chain as message.
pub fn to_status(err: &Error) -> ttrpc::Error {
    ttrpc::Error::RpcStatus(ttrpc::get_status(code(err.kind()), err.chain()))
}

#[cfg(test)]
mod tests;
