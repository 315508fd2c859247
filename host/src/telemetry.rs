//! Logging setup for the `kapsel` binary: verbosity and Kopf's formats.

use kapsel_host::{LogFormat, Logging};
use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; `RUST_LOG` overrides the verbosity flags.
pub(crate) fn init(logging: &Logging) {
    let level = if logging.quiet {
        "warn"
    } else if logging.verbose || logging.debug {
        "debug"
    } else {
        "info"
    };
    // Libraries stay quiet unless asked: their debug output drowns the operator's.
    let default = format!("warn,kapsel={level},kapsel_host={level},kapsel_apiserver={level}");
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match logging.log_format {
        LogFormat::Plain => builder
            .without_time()
            .with_level(false)
            .with_target(false)
            .init(),
        LogFormat::Full => builder.with_target(true).init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
