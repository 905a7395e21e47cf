//! Shared fixtures of the integration tests.
#![allow(dead_code, reason = "each test file uses part of the fixtures")]

pub mod racing;
pub mod storefront;
