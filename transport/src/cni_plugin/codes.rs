//! The error codes knid's CNI plugin adds to the spec's (listed in the module docs above).

/// 100: knid answered FailedPrecondition.
pub const FAILED_PRECONDITION: u32 = 100;
/// 101: knid answered ResourceExhausted.
pub const RESOURCE_EXHAUSTED: u32 = 101;
/// 102: knid answered AlreadyExists.
pub const ALREADY_EXISTS: u32 = 102;
/// 110: CHECK found the attachment differs from what it should be.
pub const CHECK_MISMATCH: u32 = 110;
/// 111: GC could not remove everything.
pub const GC_INCOMPLETE: u32 = 111;
