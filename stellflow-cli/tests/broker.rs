//! `stellflow broker` runs until SIGINT/SIGTERM, then stops the sim broker and exits 0.
#![cfg(unix)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn broker_stops_cleanly_on_sigint() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args(["broker", "--port", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run stellflow broker");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|a| a.parse::<std::net::SocketAddr>().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    assert!(std::net::TcpStream::connect(addr).is_ok(), "not listening");

    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("the broker did not stop within 10 s of SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(status.success(), "exit {status:?}: {stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("stopped"), "{stderr}");
    assert!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_err(),
        "{addr} still accepts connections"
    );
}
