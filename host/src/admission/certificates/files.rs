//! A certificate given as PEM files (`--admission-cert`, `--admission-key`, and
//! `--admission-ca` when the chain does not end with the CA): loaded at start, and
//! reloaded when their content changes while running. A mounted Secret changes by a swap
//! of its `..data` symlink, which no watch of the files' own paths sees, so the content
//! is read again every `poll`. A new version that does not load is logged and the one
//! served before is kept.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::current::{Current, Loaded, Problem};

/// How often the files are read again, unless told otherwise.
const POLL: Duration = Duration::from_secs(2);

/// The files of a certificate.
#[derive(Debug, Clone)]
pub(crate) struct Files {
    /// The certificate chain, leaf first (PEM).
    pub(crate) cert: PathBuf,
    /// The leaf's private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub(crate) key: PathBuf,
    /// The CA bundle clients trust (PEM); the chain's last certificate when absent.
    pub(crate) ca: Option<PathBuf>,
    /// How often the files are read again for changes.
    pub(crate) poll: Duration,
}

/// Why the files cannot be served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilesError {
    #[error("cannot read the admission certificate file {}: {source}", .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the admission certificate file {} is broken: {problem}", .path.display())]
    Broken { path: PathBuf, problem: String },
    #[error(
        "the admission key {} does not match the certificate {}",
        .key.display(),
        .cert.display()
    )]
    Mismatch { cert: PathBuf, key: PathBuf },
}

/// The files' bytes, as last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
    ca: Option<Vec<u8>>,
}

impl Files {
    pub(crate) fn new(cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Files {
        Files {
            cert: cert.into(),
            key: key.into(),
            ca: None,
            poll: POLL,
        }
    }

    async fn read(&self) -> Result<Contents, FilesError> {
        async fn read(path: &Path) -> Result<Vec<u8>, FilesError> {
            tokio::fs::read(path)
                .await
                .map_err(|source| FilesError::Read {
                    path: path.to_owned(),
                    source,
                })
        }
        let ca = match &self.ca {
            Some(path) => Some(read(path).await?),
            None => None,
        };
        Ok(Contents {
            cert: read(&self.cert).await?,
            key: read(&self.key).await?,
            ca,
        })
    }

    fn parse(&self, contents: &Contents) -> Result<Loaded, FilesError> {
        let broken = |path: &Path, problem: String| FilesError::Broken {
            path: path.to_owned(),
            problem,
        };
        Loaded::from_pem(&contents.cert, &contents.key, contents.ca.as_deref()).map_err(|problem| {
            match problem {
                Problem::Certificate(p) => broken(&self.cert, p),
                Problem::Key(p) => broken(&self.key, p),
                Problem::Ca(p) => broken(self.ca.as_deref().unwrap_or(&self.cert), p),
                Problem::Mismatch => FilesError::Mismatch {
                    cert: self.cert.clone(),
                    key: self.key.clone(),
                },
            }
        })
    }

    /// The certificate now, and the contents it was read from.
    ///
    /// # Errors
    /// A file that cannot be read or is broken (named), or a key not the certificate's.
    pub(crate) async fn load(&self) -> Result<(Loaded, Contents), FilesError> {
        let contents = self.read().await?;
        Ok((self.parse(&contents)?, contents))
    }

    /// Reads the files every `poll` until `stop`, and serves each new content through
    /// `current` once it loads. A problem is logged once per content (or per unreadable
    /// state), not at every poll.
    pub(crate) async fn reload(
        self,
        mut served: Contents,
        current: Arc<Current>,
        stop: CancellationToken,
    ) {
        let mut reported: Option<String> = None;
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(self.poll) => {}
            }
            let contents = match self.read().await {
                Ok(contents) => contents,
                Err(error) => {
                    let error = error.to_string();
                    if reported.as_ref() != Some(&error) {
                        tracing::warn!("{error}; the admission server keeps its certificate.");
                        reported = Some(error);
                    }
                    continue;
                }
            };
            if contents == served {
                continue;
            }
            match self.parse(&contents) {
                Ok(loaded) => {
                    current.set(loaded);
                    tracing::info!(
                        "The admission server serves the new certificate of {}.",
                        self.cert.display()
                    );
                    reported = None;
                }
                Err(error) => {
                    tracing::warn!(
                        "The admission certificate changed and does not load: {error}; the \
                         admission server keeps the certificate it had."
                    );
                    reported = Some(error.to_string());
                }
            }
            // Not read again until it changes again.
            served = contents;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::current::tests::signed;
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[tokio::test]
    async fn start_errors_name_the_file() {
        let dir = tempdir();
        let (chain, key, _) = signed();
        let (_, other_key, _) = signed();
        let cert_path = write(&dir, "tls.crt", &chain);
        let key_path = write(&dir, "tls.key", &key);
        let error = |files: Files| async move { files.load().await.unwrap_err().to_string() };

        let missing = dir.join("absent.crt");
        let text = error(Files::new(&missing, &key_path)).await;
        assert!(
            text.starts_with(&format!(
                "cannot read the admission certificate file {}:",
                missing.display()
            )),
            "{text}"
        );

        let garbage = write(
            &dir,
            "garbage.crt",
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        );
        let text = error(Files::new(&garbage, &key_path)).await;
        assert!(
            text.starts_with(&format!(
                "the admission certificate file {} is broken",
                garbage.display()
            )),
            "{text}"
        );

        let empty = write(&dir, "empty.key", "not a key");
        let text = error(Files::new(&cert_path, &empty)).await;
        assert!(
            text.starts_with(&format!(
                "the admission certificate file {} is broken",
                empty.display()
            )),
            "{text}"
        );

        let other = write(&dir, "other.key", &other_key);
        let text = error(Files::new(&cert_path, &other)).await;
        assert_eq!(
            text,
            format!(
                "the admission key {} does not match the certificate {}",
                other.display(),
                cert_path.display()
            )
        );

        let (loaded, _) = Files::new(&cert_path, &key_path).load().await.unwrap();
        assert_eq!(loaded.key.cert.len(), 2);
    }

    /// A fresh directory under the system's temporary one.
    pub(crate) fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!("kapsel-admission-{}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
}
