//! The seeded simulator (filled in by the simulator issue).
