//! The certificate the admission server serves now, swapped whole when a new one is
//! loaded, and the CA bundle that clients trust it by, published to whoever watches it
//! (the managed webhook configurations carry it as their `caBundle`).

use std::sync::{Arc, PoisonError, RwLock};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio::sync::watch;

/// A certificate chain with its key, ready to serve, and the CA bundle (PEM) that
/// clients verify it with.
#[derive(Clone)]
pub(crate) struct Loaded {
    pub(crate) key: Arc<CertifiedKey>,
    pub(crate) ca_bundle: Bytes,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded").finish_non_exhaustive()
    }
}

/// What is wrong with a certificate, its key or a CA bundle (the caller names the file
/// or the Secret's key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Problem {
    /// The certificate chain: not PEM, no certificate in it, or one that does not parse.
    Certificate(String),
    /// The private key: not PEM, none in it, or one that cannot sign.
    Key(String),
    /// The key is not the certificate's.
    Mismatch,
    /// The CA bundle: not PEM or no certificate in it.
    Ca(String),
}

impl Loaded {
    /// The chain (leaf first) and key from their PEM text, and the CA bundle: `ca` when
    /// given, else the chain's last certificate.
    pub(crate) fn from_pem(chain: &[u8], key: &[u8], ca: Option<&[u8]>) -> Result<Loaded, Problem> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(chain)
            .collect::<Result<_, _>>()
            .map_err(|e| Problem::Certificate(e.to_string()))?;
        let Some(last) = chain.last() else {
            return Err(Problem::Certificate("no certificate in it".to_owned()));
        };
        let ca_bundle = match ca {
            Some(ca) => {
                let certificates = CertificateDer::pem_slice_iter(ca)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| Problem::Ca(e.to_string()))?;
                if certificates.is_empty() {
                    return Err(Problem::Ca("no certificate in it".to_owned()));
                }
                Bytes::copy_from_slice(ca)
            }
            None => Bytes::from(pem("CERTIFICATE", last)),
        };
        let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| Problem::Key(e.to_string()))?;
        let provider = rustls::crypto::ring::default_provider();
        let signing = provider
            .key_provider
            .load_private_key(key)
            .map_err(|e| Problem::Key(e.to_string()))?;
        let certified = CertifiedKey::new(chain, signing);
        match certified.keys_match() {
            Ok(()) => {}
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
                return Err(Problem::Mismatch);
            }
            // A key whose public half rustls cannot tell: served as given.
            Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
            Err(e) => return Err(Problem::Certificate(e.to_string())),
        }
        Ok(Loaded {
            key: Arc::new(certified),
            ca_bundle,
        })
    }
}

/// DER as a PEM block of `label`.
fn pem(label: &str, der: &[u8]) -> String {
    let text = STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(&String::from_utf8_lossy(line));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// The certificate served now; what the server's TLS reads at each handshake.
pub(crate) struct Current {
    key: RwLock<Arc<CertifiedKey>>,
    ca_bundle: watch::Sender<Bytes>,
}

impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Current").finish_non_exhaustive()
    }
}

impl Current {
    pub(crate) fn new(loaded: Loaded) -> Arc<Current> {
        Arc::new(Current {
            key: RwLock::new(loaded.key),
            ca_bundle: watch::Sender::new(loaded.ca_bundle),
        })
    }

    /// Serves `loaded` from the next handshake on; the CA bundle's watchers are told
    /// only when it changed.
    pub(crate) fn set(&self, loaded: Loaded) {
        *self.key.write().unwrap_or_else(PoisonError::into_inner) = loaded.key;
        self.ca_bundle.send_if_modified(|bundle| {
            let changed = *bundle != loaded.ca_bundle;
            *bundle = loaded.ca_bundle;
            changed
        });
    }

    /// The certificate served now.
    pub(crate) fn key(&self) -> Arc<CertifiedKey> {
        Arc::clone(&self.key.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The CA bundle now, told when it changes.
    pub(crate) fn ca_bundle(&self) -> watch::Receiver<Bytes> {
        self.ca_bundle.subscribe()
    }
}

impl ResolvesServerCert for Current {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.key())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A CA and a leaf it signed for `127.0.0.1`: (chain PEM, key PEM, CA PEM).
    pub(crate) fn signed() -> (String, String, String) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        (leaf.pem() + &ca.pem(), key.serialize_pem(), ca.pem())
    }

    #[test]
    fn the_ca_bundle_is_the_chains_last_certificate_unless_given() {
        let (chain, key, ca) = signed();
        let loaded = Loaded::from_pem(chain.as_bytes(), key.as_bytes(), None).unwrap();
        assert_eq!(loaded.ca_bundle, ca.replace("\r\n", "\n").as_bytes());
        assert_eq!(loaded.key.cert.len(), 2);
        let given = Loaded::from_pem(
            chain.as_bytes(),
            key.as_bytes(),
            Some(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
        )
        .unwrap();
        assert!(
            given
                .ca_bundle
                .starts_with(b"-----BEGIN CERTIFICATE-----\nAAAA")
        );
    }

    #[test]
    fn broken_pairs_say_what_is_wrong() {
        let (chain, key, _) = signed();
        let (_, other_key, _) = signed();
        let load = |c: &str, k: &str, ca: Option<&str>| {
            Loaded::from_pem(c.as_bytes(), k.as_bytes(), ca.map(str::as_bytes))
        };
        assert_eq!(
            load(&chain, &other_key, None).unwrap_err(),
            Problem::Mismatch
        );
        assert!(matches!(load("", &key, None), Err(Problem::Certificate(_))));
        let garbled = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
        assert!(matches!(
            load(garbled, &key, None),
            Err(Problem::Certificate(_))
        ));
        assert!(matches!(load(&chain, "", None), Err(Problem::Key(_))));
        assert!(matches!(load(&chain, &key, Some("")), Err(Problem::Ca(_))));
    }

    #[test]
    fn the_ca_bundles_watchers_are_told_only_of_changes() {
        let (chain, key, _) = signed();
        let (chain2, key2, ca2) = signed();
        let load = |c: &str, k: &str| Loaded::from_pem(c.as_bytes(), k.as_bytes(), None).unwrap();
        let current = Current::new(load(&chain, &key));
        let mut bundle = current.ca_bundle();
        bundle.mark_unchanged();
        current.set(load(&chain, &key));
        assert!(!bundle.has_changed().unwrap());
        let served = load(&chain2, &key2);
        current.set(served.clone());
        assert!(bundle.has_changed().unwrap());
        assert_eq!(*bundle.borrow_and_update(), ca2.as_bytes());
        assert!(Arc::ptr_eq(&current.key(), &served.key));
    }
}
