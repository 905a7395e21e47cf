//! The compile-time rules of bounda's macros, one case per rule (regenerate the `.stderr`
//! files with `TRYBUILD=overwrite cargo test -p bounda-ui-tests` and read the diff like code).

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass/*.rs");
    cases.compile_fail("tests/ui/process/*.rs");
    cases.compile_fail("tests/ui/deadline/*.rs");
    cases.compile_fail("tests/ui/handlers/*.rs");
    cases.compile_fail("tests/ui/patch/*.rs");
    cases.compile_fail("tests/ui/derive/*.rs");
    cases.compile_fail("tests/ui/policy/*.rs");
    cases.compile_fail("tests/ui/register/*.rs");
    cases.compile_fail("tests/ui/versions/*.rs");
    cases.compile_fail("tests/ui/state/*.rs");
    cases.compile_fail("tests/ui/read_model/*.rs");
    cases.compile_fail("tests/ui/leading/*.rs");
    cases.compile_fail("tests/ui/calendar/*.rs");
}
