//! Shared fixtures of the integration tests.
#![allow(dead_code, reason = "each test file uses part of the fixtures")]

pub mod racing;
pub mod storefront;

/// Every dead letter of `app`, oldest first.
pub fn letters(app: &bounda::testing::TestApp) -> Vec<bounda::store::DeadLetter> {
    app.app()
        .dead_letters()
        .list(&bounda::store::LetterFilter::default())
        .expect("the letters read")
}
