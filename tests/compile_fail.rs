//! Every rule of the type-level contract is a compile error: each file under
//! `tests/compile_fail/` must fail to compile, with the diagnostic recorded beside it.

#[test]
fn the_type_level_contract_rejects_misuse() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
