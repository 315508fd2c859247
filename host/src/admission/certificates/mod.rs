//! Where the admission webhook server's certificate comes from: PEM files, reloaded when
//! their content changes (`files`), or a CA and a serving certificate generated once and
//! kept in a Secret every replica shares (`generated`, made by `issuing`). The server reads the certificate
//! of the moment through [`Certificates::resolver`] at each handshake (`current`); the
//! managed webhook configurations read the CA bundle, and are told when it changes,
//! through [`Certificates::ca_bundle`].

mod current;
mod files;
mod generated;
mod issuing;

use std::sync::Arc;

use bytes::Bytes;
use rustls::server::ResolvesServerCert;
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use current::Current;
pub(crate) use files::{Files, FilesError};
pub(crate) use generated::{Generated, GeneratedError};
#[allow(
    unused_imports,
    reason = "the command line (issue 33) names the Service and the listening address"
)]
pub(crate) use generated::{address_names, service_names};

#[cfg(test)]
pub(crate) use current::tests::signed;
#[cfg(test)]
pub(crate) use files::tests::tempdir;
#[cfg(test)]
pub(crate) use generated::tests::{SECRET, cluster, replica};

/// Where the certificate comes from.
#[derive(Debug)]
pub(crate) enum Source {
    Files(Files),
    Generated(Generated),
}

/// Why the admission server has no certificate.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CertificateError {
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error(transparent)]
    Generated(#[from] GeneratedError),
}

/// The admission server's certificate, kept current (files reloaded, the Secret read
/// again) until this is dropped.
#[derive(Debug)]
pub(crate) struct Certificates {
    current: Arc<Current>,
    _reloading: DropGuard,
}

impl Certificates {
    /// Loads or generates the certificate, and keeps it current from then on.
    ///
    /// # Errors
    /// The files cannot be read or are broken (named); the Secret cannot be read or
    /// written.
    pub(crate) async fn start(source: Source) -> Result<Certificates, CertificateError> {
        let stop = CancellationToken::new();
        let current = match source {
            Source::Files(files) => {
                let (loaded, contents) = files.load().await?;
                let current = Current::new(loaded);
                tokio::spawn(files.reload(contents, Arc::clone(&current), stop.clone()));
                current
            }
            Source::Generated(generated) => {
                let current = Current::new(generated.ensure().await?);
                tokio::spawn(generated.refresh(Arc::clone(&current), stop.clone()));
                current
            }
        };
        Ok(Certificates {
            current,
            _reloading: stop.drop_guard(),
        })
    }

    /// What the server's TLS reads the certificate from, at each handshake.
    pub(crate) fn resolver(&self) -> Arc<dyn ResolvesServerCert> {
        Arc::clone(&self.current) as Arc<dyn ResolvesServerCert>
    }

    /// The CA bundle (PEM) clients trust the server by, told when it changes.
    pub(crate) fn ca_bundle(&self) -> watch::Receiver<Bytes> {
        self.current.ca_bundle()
    }
}
