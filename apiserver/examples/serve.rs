//! Serves the embedded API server alone, for poking at it with kubectl.
//!
//! Run with `cargo run -p kapsel-apiserver --example serve -- [PORT] [KUBECONFIG] [STATE]`;
//! stops on Ctrl-C.

use kapsel_apiserver::{Config, serve_until};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let port = args.next().map(|p| p.parse()).transpose()?.unwrap_or(0);
    let kubeconfig = args.next();
    let mut config = Config::default().port(port);
    if let Some(state) = args.next() {
        config = config.state_file(state);
    }
    serve_until(
        config,
        |server| {
            println!("serving at {}", server.url());
            if let Some(path) = &kubeconfig
                && let Err(e) = std::fs::write(path, server.kubeconfig())
            {
                eprintln!("cannot write {path}: {e}");
            }
        },
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
    )
    .await?;
    Ok(())
}
