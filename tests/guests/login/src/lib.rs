//! A guest for the host's integration tests of login handlers (Kopf's `on.login`, KOPF.md
//! §1.12). A login handler has no files, no network and no cluster access, so the test
//! hands over what a real one would fetch from a token service through the operator's
//! memo (Kopf's `memo=`): the server, its CA, and the tokens the service would issue one
//! after another. `login` returns the next of them on each login, counting its logins in
//! the memo, and fails on the first `failures` attempts of each login, as a token service
//! that is not answering yet would make it; with `refuse`, it fails for good (a token
//! service that refuses this operator). With `certificate` and `key` (PEM) in the memo, it
//! logs in with that client certificate instead (logging `logging in with a client
//! certificate`). A create handler on kopfexamples labelled
//! `kapsel.test/login` proves the operator works with what it got.
//!
//! Build: `cargo build --target wasm32-wasip2 --release -p kapsel-test-login`.

use kapsel::{Cause, ConnectionInfo, Value, json};

/// The next token of the memo's `tokens` (the last one once they are used up), for the
/// memo's `server` with its `ca`.
#[kapsel::on::login(backoff = 1)]
fn login(cause: &mut Cause) -> kapsel::Result<ConnectionInfo> {
    let memo = cause.memo().clone();
    if memo["refuse"] == json!(true) {
        return Err(kapsel::PermanentError::new("no credentials for this operator").into());
    }
    let failures = memo["failures"].as_u64().unwrap_or(0);
    if u64::from(cause.retry()) < failures {
        return Err(kapsel::Error::msg("the token service is not answering yet"));
    }
    let text = |key: &str| memo[key].as_str().map(str::to_owned);
    let server = text("server").ok_or_else(|| kapsel::Error::msg("no server in the memo"))?;
    if let (Some(certificate), Some(key)) = (text("certificate"), text("key")) {
        let ca = text("ca").ok_or_else(|| kapsel::Error::msg("no CA in the memo"))?;
        kapsel::info!("logging in with a client certificate");
        return Ok(ConnectionInfo::new(server)
            .ca_data(ca)
            .client_certificate(certificate, key));
    }
    let tokens = memo["tokens"].as_array().cloned().unwrap_or_default();
    let logins = memo["logins"].as_u64().unwrap_or(0);
    let index = usize::try_from(logins)
        .unwrap_or(usize::MAX)
        .min(tokens.len().saturating_sub(1));
    let token = tokens
        .get(index)
        .and_then(Value::as_str)
        .ok_or_else(|| kapsel::Error::msg("no tokens in the memo"))?;
    cause.memo_mut()["logins"] = json!(logins + 1);
    let mut info = ConnectionInfo::new(server).token(token);
    if let Some(ca) = text("ca") {
        info = info.ca_data(ca);
    }
    kapsel::info!("logging in with token #{}", index + 1);
    Ok(info)
}

/// Proves the operator reaches the cluster: its result lands in the object's status.
#[kapsel::on::create("kopfexamples", labels("kapsel.test/login" = present))]
fn create_fn(cause: &Cause) -> Value {
    json!({"handled": cause.name()})
}
