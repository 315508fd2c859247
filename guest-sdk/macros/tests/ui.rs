//! trybuild tests of the handler attributes: `ui/pass` compile and run (they
//! assert on the registrations), `ui/fail` must fail with the `.stderr` shown.
//! Refresh snapshots with `TRYBUILD=overwrite cargo test -p kapsel-sdk-macros --test ui`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
