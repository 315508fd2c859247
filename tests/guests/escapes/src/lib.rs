//! A guest for the host's sandbox test: one handler that tries every way out of the
//! sandbox a std program has, and logs what it got, one line each:
//!
//! - `env: [..]`, `args: [..]`: the names of its environment variables, its arguments;
//! - `read <file>: ..`, `list /: ..`, `list .: ..`, `write <file>.copy: ..`: files, by
//!   the absolute path the test gives (`data.file` of the ConfigMap) and relative;
//! - `connect 127.0.0.1:<port>: ..`: a TCP connection to the test's listener
//!   (`data.port`); `bind udp: ..`; `resolve localhost: ..`: a name lookup;
//! - `timezone: TZ=.., /etc/localtime: ..`: where a program learns the host's timezone.
//!
//! Each attempt is `granted` or `refused (<error kind>)`. Triggered by a ConfigMap
//! labelled `kapsel.test/escape`.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-escapes`
//! (the component is `target/wasm32-wasip2/release/escapes.wasm`).

use std::io;
use std::net::{TcpStream, ToSocketAddrs, UdpSocket};

use kapsel::Cause;

/// What an attempt got.
fn outcome<T>(attempt: io::Result<T>) -> String {
    match attempt {
        Ok(_) => "granted".to_owned(),
        Err(error) => format!("refused ({:?})", error.kind()),
    }
}

/// Tries to read the environment, files, the network and the timezone.
#[kapsel::on::event("v1", "configmaps", labels("kapsel.test/escape" = present))]
fn escape(cause: &Cause) {
    let data = &cause.body()["data"];
    let file = data["file"].as_str().unwrap_or("/etc/hostname");
    let port: u16 = data["port"]
        .as_str()
        .and_then(|p| p.parse().ok())
        .unwrap_or(80);

    let names: Vec<String> = std::env::vars_os()
        .map(|(name, _)| name.to_string_lossy().into_owned())
        .collect();
    kapsel::info!("env: {names:?}");
    let args: Vec<String> = std::env::args_os()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    kapsel::info!("args: {args:?}");

    kapsel::info!("read {file}: {}", outcome(std::fs::read(file)));
    kapsel::info!("list /: {}", outcome(std::fs::read_dir("/")));
    kapsel::info!("list .: {}", outcome(std::fs::read_dir(".")));
    kapsel::info!(
        "write {file}.copy: {}",
        outcome(std::fs::write(format!("{file}.copy"), b"escaped"))
    );

    kapsel::info!(
        "connect 127.0.0.1:{port}: {}",
        outcome(TcpStream::connect(("127.0.0.1", port)))
    );
    kapsel::info!("bind udp: {}", outcome(UdpSocket::bind("127.0.0.1:0")));
    kapsel::info!(
        "resolve localhost: {}",
        outcome(("localhost", 80).to_socket_addrs())
    );

    kapsel::info!(
        "timezone: TZ={:?}, /etc/localtime: {}",
        std::env::var_os("TZ"),
        outcome(std::fs::read("/etc/localtime"))
    );
}
