//! A state that already says `#[serde(default)]`, or `#[serde(default = "..")]`, keeps its own:
//! `#[process]` adds it only where it is missing.

use bounda::prelude::*;
use bounda_ui_tests::*;

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default)]
pub struct Plain {
    reminders: u32,
}

#[process]
impl Plain {}

#[process(on = Order, started_by = [OrderPlaced])]
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
#[serde(default = "Chosen::fresh")]
pub struct Chosen {
    plan: String,
}

impl Chosen {
    fn fresh() -> Chosen {
        Chosen { plan: "basic".into() }
    }
}

#[process]
impl Chosen {}

fn main() {
    let plain: Plain = serde_json::from_str("{}").expect("reads");
    assert_eq!(plain.reminders, 0);
    let chosen: Chosen = serde_json::from_str("{}").expect("reads");
    assert_eq!(chosen.plan, "basic");
}
