//! Guides: longer reads than the API reference, each on one task. The same files are in the
//! repository's `docs/` folder; their examples are compiled and run as tests.

#[doc = include_str!("../docs/changing-a-process.md")]
pub mod changing_a_process {}

#[doc = include_str!("../docs/testing-outages.md")]
pub mod testing_outages {}

#[doc = include_str!("../docs/deploying.md")]
pub mod deploying {}

#[doc = include_str!("../docs/changing-events.md")]
pub mod changing_events {}

#[doc = include_str!("../docs/read-models.md")]
pub mod read_models {}

#[doc = include_str!("../docs/simulating.md")]
pub mod simulating {}

#[doc = include_str!("../docs/integrating.md")]
pub mod integrating {}

#[doc = include_str!("../docs/calendar-deadlines.md")]
pub mod calendar_deadlines {}
