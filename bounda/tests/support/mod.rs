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

/// Another app on `store` and `clock`, as after a deploy: `build` lists what it runs, ids are
/// fresh UUIDs so they do not collide with the first app's.
pub fn another_app(
    store: &std::sync::Arc<dyn bounda::store::Store>,
    clock: &std::sync::Arc<bounda::clock::SimulatedClock>,
    build: impl FnOnce(bounda::AppBuilder) -> bounda::AppBuilder,
) -> bounda::testing::TestApp {
    let builder = bounda::App::builder_shared(store.clone())
        .only_listed()
        .clock(clock.clone())
        .ids(std::sync::Arc::new(bounda::ids::UuidV7));
    bounda::testing::TestApp::with_app(
        build(builder).build().expect("the app builds"),
        clock.clone(),
    )
}
