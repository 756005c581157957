//! The guide page "Testing your application" shows the test a user copies: it must be the
//! test this crate runs, word for word.

#[test]
fn the_guide_page_shows_the_test_that_runs() {
    let page = include_str!("../../docs/testing-your-application.md");
    let test = include_str!("testing_your_application.rs");
    let block = format!("```rust\n{test}```\n");
    assert!(
        page.contains(&block),
        "docs/testing-your-application.md does not show tests/testing_your_application.rs as it is"
    );
}
