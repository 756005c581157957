//! The simulation finds a bug: with the transformer's planted bug (an input marked processed
//! before its output is acknowledged), some world of the CI set loses an output.

#[allow(dead_code)]
#[path = "../../runtime-tokio/examples/transform_tokio.rs"]
mod transform_tokio;

mod app_world;

use transform_tokio::Planted;

#[test]
fn a_service_that_marks_inputs_before_their_outputs_are_acknowledged_fails_a_world() {
    let failing = (0..200).find_map(|seed| {
        app_world::run(seed, Planted::CommitEarly)
            .err()
            .map(|e| (seed, e))
    });
    let (seed, why) = failing.expect("no world of the CI set found the planted bug");
    println!("the planted bug fails seed {seed}: {why}");
    assert!(
        why.contains("lost"),
        "seed {seed} failed, but not by losing an output: {why}"
    );
}
