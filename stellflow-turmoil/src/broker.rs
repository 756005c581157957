//! The software of one broker host: accepts connections on the broker's port and carries
//! bytes between each socket and the shared cluster model, and fires the model's timers.

use crate::SimulatedCluster;
use bytes::BytesMut;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;
use stellflow_sim::ConnId;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use turmoil::net::{TcpListener, TcpStream};

/// The longest a timer task sleeps without looking at the model's deadline again.
const TIMER_CAP: Duration = Duration::from_millis(100);
/// Room of one read from a client.
const READ_ROOM: usize = 64 * 1024;

/// Serves broker `id` of `cluster` on `port` until its host crashes. Its tasks join the
/// host's `LocalSet`, so a crash drops them (and closes their connections) in the order
/// they were spawned: the same on every replay of a world.
pub(crate) async fn serve(cluster: SimulatedCluster, id: i32, port: u16) -> turmoil::Result {
    let listener = TcpListener::bind((IpAddr::V4(Ipv4Addr::UNSPECIFIED), port)).await?;
    tokio::task::spawn_local(fire_timers(cluster.clone()));
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::task::spawn_local(serve_connection(cluster.clone(), id, stream));
    }
}

/// Fires the model's timers (delayed answers, `acks = -1` waits) when they are due.
async fn fire_timers(cluster: SimulatedCluster) {
    loop {
        let (wait, changed) = cluster.with_state(|st| (st.next_timer(), st.timer.clone()));
        let wait = wait.map_or(TIMER_CAP, |w| w.min(TIMER_CAP));
        tokio::select! {
            biased;
            _ = changed.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
        cluster.with_state(|st| st.fire_timers());
    }
}

/// Forgets the model's connection when its task ends, however it ends (a crash of the host
/// drops the task).
struct Forget {
    cluster: SimulatedCluster,
    conn: ConnId,
}

impl Drop for Forget {
    fn drop(&mut self) {
        self.cluster.with_state(|st| st.forget(self.conn));
    }
}

/// Carries one client connection: its bytes to the model, the model's answers back. Ends
/// when the client closes it, the model closes it (the socket is dropped: the client sees
/// its end) or the host crashes.
async fn serve_connection(cluster: SimulatedCluster, broker: i32, stream: TcpStream) {
    let Ok((conn, notify)) = cluster.with_state(|st| st.open(broker)) else {
        return; // down in the model: the client sees the connection end at once
    };
    let _forget = Forget {
        cluster: cluster.clone(),
        conn,
    };
    let (mut reader, mut writer) = stream.into_split();
    let mut buf = BytesMut::with_capacity(READ_ROOM);
    loop {
        let (frames, closed) = cluster.with_state(|st| st.take_out(conn));
        for frame in frames {
            if writer.write_all(&frame).await.is_err() {
                return;
            }
        }
        if closed {
            return;
        }
        if buf.capacity() - buf.len() < READ_ROOM / 4 {
            buf.reserve(READ_ROOM);
        }
        tokio::select! {
            biased;
            _ = notify.notified() => {}
            read = reader.read_buf(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(_) => cluster.with_state(|st| st.input(conn, &mut buf)),
            }
        }
    }
}
