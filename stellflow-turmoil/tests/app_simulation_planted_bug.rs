//! The simulation finds a bug: with the transformer's planted bug (an input marked processed
//! before its output is acknowledged), some world of the CI set fails, and the same world
//! passes without it.

#[allow(dead_code)]
#[path = "../../runtime-tokio/examples/transform_tokio.rs"]
mod transform_tokio;

// Shared with `app_simulation`; this test reads only whether a world failed.
#[allow(dead_code)]
mod app_world;

use transform_tokio::Planted;

#[test]
fn a_service_that_marks_inputs_before_their_outputs_are_acknowledged_fails_a_world() {
    let failing = (0..200).find_map(|seed| {
        let failed = app_world::run(seed, Planted::CommitEarly).err();
        failed.map(|why| (seed, why))
    });
    let (seed, why) = failing.expect("no world of the CI set found the planted bug");
    println!("the planted bug fails seed {seed}: {why}");
    if let Err(e) = app_world::run(seed, Planted::Nothing) {
        panic!("seed {seed} fails without the planted bug too: {e}");
    }
}
