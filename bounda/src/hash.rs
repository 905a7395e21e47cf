//! A stable hash: the same on every machine and build, for what is derived from text and must
//! not change between builds (names of tables and locks, declarations, fingerprints, the
//! simulation's fates).

/// FNV-1a of `text`.
///
/// ```
/// assert_eq!(bounda::hash::fnv1a(""), 0xcbf2_9ce4_8422_2325);
/// assert_ne!(bounda::hash::fnv1a("a"), bounda::hash::fnv1a("b"));
/// ```
pub fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
    })
}
