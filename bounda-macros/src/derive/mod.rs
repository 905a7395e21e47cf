//! The derives for aggregates' events and commands' rejections.

pub(crate) mod event;
pub(crate) mod events;
pub(crate) mod rejection;
pub(crate) mod versions;
