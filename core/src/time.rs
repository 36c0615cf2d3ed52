//! Time as the core sees it: an opaque count of nanoseconds from an origin the driver picks.
//!
//! The core never asks what time it is; every input carries `now`. The shell maps
//! `std::time::Instant` onto this type at exactly one place, the simulator uses virtual time.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time: nanoseconds since an arbitrary, driver-chosen origin.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Instant(u64);

impl Instant {
    /// The driver's origin.
    pub const ZERO: Instant = Instant(0);

    /// The instant `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// The instant `millis` milliseconds after the origin (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Milliseconds since the origin (truncated), handy for traces.
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000_000
    }

    /// Time elapsed from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        let nanos = u64::try_from(rhs.as_nanos()).unwrap_or(u64::MAX);
        Instant(self.0.saturating_add(nanos))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_duration_since(rhs)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0 / 1_000_000;
        let rest = self.0 % 1_000_000;
        if rest == 0 {
            write!(f, "{ms}ms")
        } else {
            write!(f, "{ms}.{rest:06}ms")
        }
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let t = Instant::from_nanos(u64::MAX - 1);
        assert_eq!(t + Duration::from_secs(1), Instant::from_nanos(u64::MAX));
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(
            Instant::from_millis(5) - Instant::from_millis(2),
            Duration::from_millis(3)
        );
    }

    #[test]
    fn debug_prints_milliseconds() {
        assert_eq!(format!("{:?}", Instant::from_millis(250)), "250ms");
        assert_eq!(
            format!("{:?}", Instant::from_nanos(1_500_000)),
            "1.500000ms"
        );
    }
}
