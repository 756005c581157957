//! The shared behavioural suite on stellflow-smol under smol's executor.

struct Smol;

stellflow_adapter_tests::impl_async_adapter!(
    Smol,
    stellflow_smol,
    "smol",
    block_on = smol::block_on,
    sleep = async_io::Timer::after
);
stellflow_adapter_tests::suite!(Smol);
