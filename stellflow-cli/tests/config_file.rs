//! `--config FILE`: a Java `.properties` file of Kafka-style keys configures the client (the
//! brokers included), `--bootstrap` and `-X` override it, and a wrong key fails naming the
//! file and what was meant.

mod common;

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

/// Runs `stellflow args` with empty stdin.
fn stellflow(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stellflow"))
        .args(args)
        .env_remove("STELLFLOW_BOOTSTRAP")
        .stdin(Stdio::null())
        .output()
        .expect("run stellflow")
}

/// A properties file holding `text`, in a directory of this test run.
fn file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("stellflow-cli-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_properties_file_configures_the_client_and_flags_override_it() {
    let (_server, addr) = common::sim_with_topic("orders");
    let (host, port) = addr.rsplit_once(':').unwrap();
    // The Java client's syntax: comments, `:` and blank separators, a continued line.
    let good = file(
        "good.properties",
        &format!(
            "# billing service\n! settings\nbootstrap.servers = {host}:\\\n    {port}\nclient.id: billing\nacks all\nlinger.ms=20\n"
        ),
    );
    let good = good.to_str().unwrap();
    let out = stellflow(&["--config", good, "topics", "list"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("orders"));
    assert!(
        !stderr.contains("embedded"),
        "the file names the broker: {stderr}"
    );

    // `--bootstrap` overrides the file's brokers, and so does `-X bootstrap.servers`.
    let elsewhere = file(
        "elsewhere.properties",
        "bootstrap.servers=127.0.0.1:1\nlinger.ms=20\n",
    );
    let elsewhere = elsewhere.to_str().unwrap();
    for args in [
        &["-F", elsewhere, "--bootstrap", &addr, "topics", "list"][..],
        &[
            "-F",
            elsewhere,
            "-X",
            &format!("bootstrap.servers={addr}"),
            "topics",
            "list",
        ][..],
        // -X after the file: both set linger.ms, the flag last.
        &[
            "-F",
            elsewhere,
            "-X",
            "linger.ms=5",
            "--bootstrap",
            &addr,
            "topics",
            "list",
        ][..],
    ] {
        let out = stellflow(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?}: {stderr}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("orders"),
            "{args:?}"
        );
    }
}

#[test]
fn a_wrong_file_fails_naming_the_file_and_the_remedy() {
    let cases = [
        (
            "typo.properties",
            "bootstrap.servers=a:1\nlingr.ms=5\n",
            "did you mean \"linger.ms\"?",
        ),
        (
            "kafka.properties",
            "bootstrap.servers=a:1\ncompression.type=gzip\n",
            "stellflow.batch.format=native-gzip",
        ),
        (
            "tls.properties",
            "bootstrap.servers=a:1\nsecurity.protocol=SSL\n",
            "no TLS or SASL",
        ),
        (
            "escape.properties",
            "client.id=a\\u00\n",
            "line 1: malformed \\uXXXX escape",
        ),
    ];
    for (name, text, says) in cases {
        let path = file(name, text);
        let out = stellflow(&["--config", path.to_str().unwrap(), "cluster"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(
            stderr.contains(name) && stderr.contains(says),
            "{name}: {stderr}"
        );
    }
    let out = stellflow(&["--config", "no-such-file.properties", "cluster"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot read the configuration file no-such-file.properties"),
        "{stderr}"
    );
}
