//! Measures what the state file's write-ahead log costs per acknowledged write: N
//! sequential ConfigMap creates over HTTP against an in-memory server, then against one
//! with a state file (each create synced to disk before its answer).
//!
//! Run with `cargo run --release -p kapsel-apiserver --example wal_cost -- [N] [DIR]`
//! (DIR: where the state file goes, default the system temp dir; its filesystem decides
//! the sync cost).

use kapsel_apiserver::{ApiServer, Config};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One create on a fresh connection; returns the status code.
async fn create(addr: std::net::SocketAddr, i: usize) -> std::io::Result<u16> {
    let body = format!(r#"{{"metadata":{{"name":"cm-{i}"}},"data":{{"i":"{i}"}}}}"#);
    let req = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).await?;
    let code = String::from_utf8_lossy(&buf)
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok(code)
}

async fn run(config: Config, n: usize) -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
    let server = ApiServer::start(config).await?;
    let mut times = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        let code = create(server.addr(), i).await?;
        times.push(t.elapsed());
        if code != 201 {
            return Err(format!("create {i} answered {code}").into());
        }
    }
    server.shutdown().await?;
    times.sort();
    Ok(times)
}

fn summary(times: &[Duration]) -> String {
    let mean = times.iter().sum::<Duration>() / times.len().max(1) as u32;
    let median = times.get(times.len() / 2).copied().unwrap_or_default();
    let p99 = times
        .get(times.len() * 99 / 100)
        .copied()
        .unwrap_or_default();
    format!("mean {mean:?}, median {median:?}, p99 {p99:?}")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(500);
    let dir = args.next().map_or_else(std::env::temp_dir, Into::into);
    let path = dir.join(format!("kapsel-wal-cost-{}.state", std::process::id()));
    let memory = run(Config::default(), n).await?;
    let logged = run(Config::default().state_file(&path), n).await?;
    let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let _ = std::fs::remove_file(&path);
    println!("{n} creates, in memory:      {}", summary(&memory));
    println!("{n} creates, with the log:   {}", summary(&logged));
    let extra = logged[n / 2].saturating_sub(memory[n / 2]);
    println!("the log's cost per write (median difference): {extra:?}; state file {size} bytes");
    Ok(())
}
