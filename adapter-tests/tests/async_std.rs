//! The shared behavioural suite on stellflow-smol under async-std's executor: async-std users
//! are served by stellflow-smol without it depending on the discontinued runtime (async-std is
//! a dev-dependency of this test crate only).

struct AsyncStd;

stellflow_adapter_tests::impl_async_adapter!(
    AsyncStd,
    stellflow_smol,
    "smol on async-std",
    block_on = async_std::task::block_on,
    sleep = async_std::task::sleep
);
stellflow_adapter_tests::suite!(AsyncStd);
