//! [`Client`]: one set of connections and one driver, handing out the three handles.

use crate::driver::Driver;
use crate::state::Link;
use crate::{Admin, ClientConfig, ClusterHealth, ClusterMetadata, Consumer, Counters, Error};
use crate::{Options, Producer};
use crate::{Result, Runtime};
use std::marker::PhantomData;

/// A connection to a Stellflow cluster: one core, one driver and its sockets, shared by every
/// [`Producer`], [`Consumer`] and [`Admin`] it hands out. Cheap to clone. `R` is the runtime
/// that drives it; each adapter crate names it for you (`stellflow_tokio::Client`, ...).
///
/// Ending: [`Client::close`](#method.close) flushes and closes the producer, closes the consumer
/// (committing with auto-commit), and waits for the driver to end. Dropping the last clone of the
/// client and of its handles without `close` leaves the driver to do the same in the background, up
/// to [`Options::close_timeout`] — as long as its runtime runs: a runtime that shuts down first
/// drops the driver, fails the outstanding deliveries with [`Error::Shutdown`] and logs an error
/// (`tracing`) with the number of records lost. Call `close` before leaving the runtime.
#[derive(Debug)]
pub struct Client<R: Runtime> {
    pub(crate) link: Link,
    runtime: PhantomData<R>,
}

impl<R: Runtime> Clone for Client<R> {
    fn clone(&self) -> Self {
        Client {
            link: self.link.clone(),
            runtime: PhantomData,
        }
    }
}

impl<R: Runtime> Client<R> {
    /// Starts a client with default [`Options`]. Connections open on demand: this does not
    /// wait for the broker (commands wait within the core's request timeout).
    pub async fn connect(config: ClientConfig) -> Result<Client<R>> {
        Self::connect_with(config, Options::default()).await
    }

    /// Like [`Client::connect`](#method.connect), with adapter options.
    pub async fn connect_with(config: ClientConfig, options: Options) -> Result<Client<R>> {
        let (link, wake) = Link::new::<R>(config, options)?;
        let driver = Driver::<R>::new(link.state.clone(), wake);
        R::spawn("stellflow-driver", driver.run()).map_err(|e| Error::Spawn(e.to_string()))?;
        Ok(Client {
            link,
            runtime: PhantomData,
        })
    }

    /// A producer handle (all of a client's producer handles share its one producer).
    pub fn producer(&self) -> Producer<R> {
        Producer {
            client: self.clone(),
        }
    }

    /// A consumer handle (all of a client's consumer handles share its one consumer).
    pub fn consumer(&self) -> Consumer<R> {
        Consumer {
            client: self.clone(),
        }
    }

    /// An admin handle.
    pub fn admin(&self) -> Admin<R> {
        Admin {
            client: self.clone(),
        }
    }

    /// A snapshot of the merged cluster metadata (brokers, topics, leaders).
    pub fn metadata(&self) -> ClusterMetadata {
        self.link.get(|st| st.client.metadata().clone())
    }

    /// Asks for a metadata refresh now (the core also refreshes on errors and periodically);
    /// the outcome shows in [`Client::metadata`](#method.metadata).
    pub fn refresh_metadata(&self) -> Result<()> {
        self.link.with(|st, now| st.client.refresh_metadata(now))
    }

    /// The cluster's health now: healthy, degraded, or unreachable since an instant, with
    /// every broker's last answer and last failure (see [`crate::HealthState`]). Once no broker has
    /// answered for `ClientConfig::unreachable_timeout`, a consumer's `poll`/`recv` return
    /// [`crate::ConsumerError::Unreachable`] once per outage.
    pub fn cluster_health(&self) -> ClusterHealth {
        self.link.get(|st| st.client.cluster_health())
    }

    /// A snapshot of the client's request and connection counters.
    pub fn counters(&self) -> Counters {
        self.link.get(|st| st.client.counters().clone())
    }

    /// The last failed connection attempt (`"cannot connect to host:port: why"`) while the
    /// most recent attempt failed: turns a timeout into a useful message.
    pub fn connect_error(&self) -> Option<String> {
        self.link.get(|st| st.connect_error.clone())
    }

    /// Ends the client without losing anything: flushes and closes the producer (up to
    /// [`Options::close_timeout`]), closes the consumer (committing with auto-commit), then
    /// closes the sockets and waits for the driver to end. Every handle fails with
    /// [`Error::Shutdown`] afterwards. An error names what was not delivered or committed.
    ///
    /// Cancel safety: dropping the future part-way leaves the close running in the driver.
    pub async fn close(&self) -> Result<()> {
        let producer = self.producer().close().await;
        let consumer = self.consumer().close().await;
        let stop = |st: &mut crate::state::State, _, tx| {
            (st.stop, st.replan) = (true, true);
            st.ended.push(tx);
        };
        self.link.call(stop).await?;
        producer.and(consumer)
    }
}
