//! Ids: random (UUID v7) in production, sequential in tests, and derived ids that
//! depend only on their inputs (UUID v5).

use std::sync::atomic::{AtomicU64, Ordering};

use uuid::Uuid;

/// Where the runtime gets new ids: command ids, event ids, claim ids.
pub trait IdGenerator: Send + Sync + 'static {
    /// A new id.
    fn next_id(&self) -> String;
}

/// UUID v7: time-ordered and unique.
#[derive(Debug, Clone, Copy, Default)]
pub struct UuidV7;

impl IdGenerator for UuidV7 {
    fn next_id(&self) -> String {
        Uuid::now_v7().to_string()
    }
}

/// `id-1`, `id-2`, …: readable assertions in tests.
#[derive(Debug, Default)]
pub struct Sequential {
    next: AtomicU64,
}

impl IdGenerator for Sequential {
    fn next_id(&self) -> String {
        format!("id-{}", self.next.fetch_add(1, Ordering::Relaxed) + 1)
    }
}

/// bounda's namespace for derived ids.
const NAMESPACE: Uuid = Uuid::from_u128(0x6b0f_5d1c_9a7e_4e21_b3d4_0c8f_2a61_7e95);

/// A UUID that depends only on `parts`: the same parts give the same id on every run, retry and
/// machine.
pub fn derived_id(parts: &[&str]) -> String {
    Uuid::new_v5(&NAMESPACE, parts.join("\u{1f}").as_bytes()).to_string()
}

/// A UUID that depends only on `key` and `name`: the id of an aggregate a run creates, or a
/// per-call key for a provider.
pub fn idempotency_key_for(key: &str, name: &str) -> String {
    derived_id(&["key-for", key, name])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_count_from_one() {
        let ids = Sequential::default();
        assert_eq!([ids.next_id(), ids.next_id()], ["id-1", "id-2"]);
    }

    #[test]
    fn uuid_v7_ids_are_unique_and_ordered() {
        let (a, b) = (UuidV7.next_id(), UuidV7.next_id());
        assert_ne!(a, b);
        assert!(Uuid::parse_str(&a).is_ok());
    }

    // spec 139
    #[test]
    fn derived_ids_depend_only_on_their_parts() {
        assert_eq!(derived_id(&["a", "b"]), derived_id(&["a", "b"]));
        assert_ne!(
            derived_id(&["a", "b"]),
            derived_id(&["ab"]),
            "parts are separated"
        );
        assert_eq!(
            idempotency_key_for("k", "payment"),
            idempotency_key_for("k", "payment")
        );
        assert_ne!(
            idempotency_key_for("k", "payment"),
            idempotency_key_for("k", "refund")
        );
    }
}
