//! Sizes in words, for the limits every transport states in its errors.

/// One mebibyte.
pub(crate) const MIB: usize = 1024 * 1024;

/// `n` bytes in words ("16 MiB", "64 KiB", "1000 bytes").
#[allow(clippy::manual_is_multiple_of)] // `is_multiple_of` is newer than the workspace MSRV
pub(crate) fn human_size(n: usize) -> String {
    if n >= MIB && n % MIB == 0 {
        format!("{} MiB", n / MIB)
    } else if n >= 1024 && n % 1024 == 0 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} bytes")
    }
}
