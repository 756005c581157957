//! The shared behavioural suite on stellflow-tokio (multi-threaded runtime, 2 workers).

struct Tokio;

fn block_on<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

stellflow_adapter_tests::impl_async_adapter!(
    Tokio,
    stellflow_tokio,
    "tokio",
    block_on = block_on,
    sleep = tokio::time::sleep
);
stellflow_adapter_tests::suite!(Tokio);
