//! Who we are among the peers, as Kopf forms it (KOPF.md §8.3): env `POD_ID`
//! if set; else `user@host/YYYYmmddHHMMSS/xyz` for an operator (unique per
//! run) and `user@host` for `freeze`/`resume` (so `resume` finds what
//! `freeze` wrote).

use rand::seq::IndexedRandom;

/// Kopf's alphabet for the random suffix (it has no `g`).
const SUFFIX_ALPHABET: &[u8] = b"abcdefhijklmnopqrstuvwxyz0123456789";

/// The identity of a running operator.
pub(crate) fn for_operator() -> String {
    if let Some(pod) = pod_id() {
        return pod;
    }
    let now = chrono::Utc::now().format("%Y%m%d%H%M%S");
    let mut rng = rand::rng();
    let suffix: String = (0..3)
        .filter_map(|_| SUFFIX_ALPHABET.choose(&mut rng))
        .map(|&b| char::from(b))
        .collect();
    format!("{}@{}/{now}/{suffix}", user(), host())
}

/// The identity of a manual command (`freeze`, `resume`).
pub(crate) fn for_command() -> String {
    pod_id().unwrap_or_else(|| format!("{}@{}", user(), host()))
}

fn pod_id() -> Option<String> {
    std::env::var("POD_ID").ok()
}

/// The login name, looked up as Python's `getpass.getuser()` does: the
/// environment first, then the password database.
fn user() -> String {
    ["LOGNAME", "USER", "LNAME", "USERNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .or_else(user_from_passwd)
        .unwrap_or_else(|| "unknown".to_owned())
}

#[cfg(unix)]
fn user_from_passwd() -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    // Our own process directory belongs to our user: the uid without libc.
    let uid = std::fs::metadata("/proc/self").ok()?.uid();
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id = fields.nth(1)?;
        (id.parse() == Ok(uid)).then(|| name.to_owned())
    })
}

#[cfg(not(unix))]
fn user_from_passwd() -> Option<String> {
    None
}

/// The machine's host name. Kopf prefers a reverse-DNS name of it when one
/// exists; the plain host name identifies the machine as well.
fn host() -> String {
    ["/proc/sys/kernel/hostname", "/etc/hostname"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::env::var("COMPUTERNAME").ok())
        .unwrap_or_else(|| "localhost".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operator_identities_are_unique_per_run_and_commands_are_stable() {
        // POD_ID is not set in the test environment.
        if std::env::var_os("POD_ID").is_some() {
            assert_eq!(for_operator(), for_command());
            return;
        }
        let command = for_command();
        let operator = for_operator();
        let (user_host, rest) = operator.split_once('/').unwrap();
        assert_eq!(user_host, command);
        assert!(command.contains('@'), "{command}");
        let (stamp, suffix) = rest.split_once('/').unwrap();
        assert_eq!(stamp.len(), 14, "{stamp}");
        assert!(stamp.bytes().all(|b| b.is_ascii_digit()), "{stamp}");
        assert_eq!(suffix.len(), 3, "{suffix}");
        assert!(suffix.bytes().all(|b| SUFFIX_ALPHABET.contains(&b)));
    }
}
