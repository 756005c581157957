//! Compiles and runs the minimal driver shown in the crate docs (`doc/driver.rs`, included by
//! `src/lib.rs`). It is not a doctest: it needs the simulated broker, and stellflow-sim depends
//! on this crate, so the packaged crate cannot dev-depend on it (see Cargo.toml).

mod driver {
    include!("../doc/driver.rs");

    pub(super) fn run() {
        main();
    }
}

#[test]
fn the_crate_docs_driver_runs() {
    driver::run();
}
