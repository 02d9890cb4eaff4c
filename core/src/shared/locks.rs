//! Locks that outlive a panic. knid's locks guard state that every writer leaves consistent
//! before it can panic (whole values swapped in, counters, queues), so a poisoned lock still holds
//! good data: a panicking request must not take every later caller down with it.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// [`Mutex::lock`], ignoring poison.
pub trait LockExt<T: ?Sized> {
    /// The guard, whether or not a previous holder panicked.
    fn acquire(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> LockExt<T> for Mutex<T> {
    fn acquire(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// [`RwLock::read`] and [`RwLock::write`], ignoring poison.
pub trait RwLockExt<T: ?Sized> {
    /// A read guard, whether or not a previous writer panicked.
    fn shared(&self) -> RwLockReadGuard<'_, T>;
    /// The write guard, whether or not a previous writer panicked.
    fn exclusive(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLockExt<T> for RwLock<T> {
    fn shared(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|p| p.into_inner())
    }

    fn exclusive(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|p| p.into_inner())
    }
}
