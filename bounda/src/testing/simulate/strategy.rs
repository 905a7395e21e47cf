//! Inputs drawn from a proptest strategy: for an app whose outside world is already described by
//! strategies, [`Input::draw`](super::Input::draw) in one line.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, Reason, RngAlgorithm, TestRng, TestRunner};
use rand::Rng;

use super::SimRng;

/// One value of `strategy`, drawn from the schedule's random source: the same seed draws the
/// same value. Fails when the strategy rejects every try (a filter too strict).
///
/// ```
/// use bounda::testing::simulate::{SimRng, draw_from};
/// use proptest::prelude::*;
/// use rand::SeedableRng;
///
/// #[derive(Debug, Clone)]
/// enum Customer { Start(u8), Upgrade(u8) }
///
/// fn customer() -> impl Strategy<Value = Customer> {
///     prop_oneof![(0..3u8).prop_map(Customer::Start), (0..3u8).prop_map(Customer::Upgrade)]
/// }
///
/// let mut rng = SimRng::seed_from_u64(7);
/// let drawn = draw_from(&customer(), &mut rng).expect("no filter to reject");
/// let again = draw_from(&customer(), &mut SimRng::seed_from_u64(7)).expect("the same");
/// assert_eq!(format!("{drawn:?}"), format!("{again:?}"));
/// ```
pub fn draw_from<S: Strategy>(strategy: &S, rng: &mut SimRng) -> Result<S::Value, Reason> {
    let mut seed = [0u8; 32];
    rng.fill(&mut seed);
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed),
    );
    Ok(strategy.new_tree(&mut runner)?.current())
}
