//! The ServiceAccount kubeconfigs of `kapsel dev-cluster --rbac --service-account NS/NAME`:
//! once an account exists, a kubeconfig acting as it is written beside the admin's, so that
//! the host runs locally with the rights its Deployment has; again when it is re-created.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kapsel_apiserver::ApiServer;

/// How long the written tokens are valid: a working day's session.
const VALID_FOR: Duration = Duration::from_secs(24 * 3600);

/// How often the accounts are looked for.
const INTERVAL: Duration = Duration::from_millis(250);

/// `NAMESPACE/NAME`, checked.
pub(crate) fn parse(account: &str) -> Result<(String, String), String> {
    match account.split_once('/') {
        Some((namespace, name))
            if !namespace.is_empty() && !name.is_empty() && !name.contains('/') =>
        {
            Ok((namespace.to_owned(), name.to_owned()))
        }
        _ => Err(format!(
            "--service-account {account:?}: expected NAMESPACE/NAME, e.g. kapsel/kapsel"
        )),
    }
}

/// The kubeconfig of `namespace/name`, beside the admin's `kubeconfig`.
pub(crate) fn path(kubeconfig: &Path, (namespace, name): &(String, String)) -> PathBuf {
    kubeconfig.with_file_name(format!("{namespace}-{name}.kubeconfig"))
}

/// Writes each account's kubeconfig once it exists, and again once it exists anew (its
/// old token no longer authenticates: the uid it names is gone), until dropped.
pub(crate) async fn write_when_they_exist(
    server: &ApiServer,
    kubeconfig: &Path,
    accounts: &[(String, String)],
) {
    // The uid of each account whose kubeconfig is written.
    let mut written: Vec<Option<String>> = vec![None; accounts.len()];
    loop {
        for (account, written) in accounts.iter().zip(&mut written) {
            let (namespace, name) = account;
            let uid = server.service_account_uid(namespace, name);
            if uid.is_none() || uid == *written {
                continue;
            }
            let Ok(text) = server.service_account_kubeconfig(namespace, name, VALID_FOR) else {
                continue;
            };
            let file = path(kubeconfig, account);
            match std::fs::write(&file, text) {
                Ok(()) => tracing::info!(
                    "The ServiceAccount {namespace}/{name} exists: {} acts as it (a token \
                     valid for {} h), e.g. kapsel run --kubeconfig {}.",
                    file.display(),
                    VALID_FOR.as_secs() / 3600,
                    file.display()
                ),
                Err(e) => tracing::error!("Cannot write {}: {e}", file.display()),
            }
            *written = uid;
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_are_namespace_slash_name() {
        assert_eq!(
            parse("kapsel/kapsel"),
            Ok(("kapsel".to_owned(), "kapsel".to_owned()))
        );
        for bad in ["kapsel", "/x", "x/", "a/b/c"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let account = ("ops".to_owned(), "op".to_owned());
        assert_eq!(
            path(Path::new(".kapsel/kubeconfig"), &account),
            Path::new(".kapsel/ops-op.kubeconfig")
        );
    }
}
