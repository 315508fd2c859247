//! The generated certificates themselves, without I/O: a CA, a serving certificate it
//! signs for given names (anew under the same CA when only the serving certificate nears
//! its end, so the CA bundle clients trust stays), and the check that a CA and a serving
//! certificate are valid for those names now and a while from now. The Secret they are
//! kept in is `generated`'s.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use rustls::client::danger::ServerCertVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

use super::current::Loaded;

/// The common name of the CA: a serving certificate renewed under a kept CA names it as
/// its issuer, so it must be the name the CA was made with.
const CA_NAME: &str = "kapsel-admission-ca";

/// How long what is generated is valid, and when it is renewed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Validity {
    /// The CA's lifetime.
    pub(crate) ca: Duration,
    /// The serving certificate's lifetime.
    pub(crate) serving: Duration,
    /// How long before its end a certificate (or its CA) is replaced.
    pub(crate) renew_before: Duration,
}

impl Default for Validity {
    fn default() -> Validity {
        const DAY: u64 = 24 * 3600;
        Validity {
            ca: Duration::from_secs(10 * 365 * DAY),
            serving: Duration::from_secs(365 * DAY),
            renew_before: Duration::from_secs(30 * DAY),
        }
    }
}

/// A CA and a serving certificate it signed, with their keys (PEM): a Secret's
/// `ca.crt`, `ca.key`, `tls.crt`, `tls.key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Material {
    pub(crate) tls_crt: String,
    pub(crate) tls_key: String,
    pub(crate) ca_crt: String,
    pub(crate) ca_key: String,
}

impl Material {
    /// A new CA, and a serving certificate it signed for `names` (DNS names and IP
    /// addresses as text).
    pub(crate) fn generate(names: &[String], validity: Validity) -> Result<Material, rcgen::Error> {
        let ca_key = rcgen::KeyPair::generate()?;
        let ca = ca_params(validity.ca)?.self_signed(&ca_key)?;
        let (tls_crt, tls_key) = serve(names, validity.serving, &ca, &ca_key)?;
        Ok(Material {
            tls_crt,
            tls_key,
            ca_crt: ca.pem(),
            ca_key: ca_key.serialize_pem(),
        })
    }

    /// A new serving certificate under this CA, when its key is here and the result passes
    /// [`Material::check`] (a CA near its own end does not).
    pub(crate) fn renewed(&self, names: &[String], validity: Validity) -> Option<Material> {
        let ca_key = rcgen::KeyPair::from_pem(&self.ca_key).ok()?;
        // What signs is the CA's name and key: the same as the stored CA's, re-made.
        let ca = ca_params(validity.ca).ok()?.self_signed(&ca_key).ok()?;
        let (tls_crt, tls_key) = serve(names, validity.serving, &ca, &ca_key).ok()?;
        let renewed = Material {
            tls_crt,
            tls_key,
            ..self.clone()
        };
        renewed
            .check(names, validity.renew_before)
            .is_ok()
            .then_some(renewed)
    }

    /// The certificate to serve, with `ca.crt` as the CA bundle.
    pub(crate) fn loaded(&self) -> Result<Loaded, String> {
        Loaded::from_pem(
            self.tls_crt.as_bytes(),
            self.tls_key.as_bytes(),
            Some(self.ca_crt.as_bytes()),
        )
        .map_err(|problem| format!("it is broken: {problem:?}"))
    }

    /// The certificate to serve, when `ca.crt` verifies it for every name, now and
    /// `renew_before` from now; else why not.
    pub(crate) fn check(&self, names: &[String], renew_before: Duration) -> Result<Loaded, String> {
        let loaded = self.loaded()?;
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(self.ca_crt.as_bytes()) {
            let ca = ca.map_err(|e| format!("its ca.crt is broken: {e}"))?;
            roots
                .add(ca)
                .map_err(|e| format!("its ca.crt is broken: {e}"))?;
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .map_err(|e| format!("its ca.crt cannot verify: {e}"))?;
        let (leaf, chain) = loaded
            .key
            .cert
            .split_first()
            .ok_or_else(|| "its tls.crt has no certificate".to_owned())?;
        let now = SystemTime::now();
        // webpki takes a trust anchor as valid whatever its dates; Go (kube-apiserver)
        // does not.
        for ca in CertificateDer::pem_slice_iter(self.ca_crt.as_bytes()).flatten() {
            let end = not_after(&ca).ok_or("its ca.crt has no readable end of validity")?;
            if end <= now + renew_before {
                return Err(format!(
                    "its CA is not valid after {}",
                    chrono::DateTime::<chrono::Utc>::from(end)
                ));
            }
        }
        for name in names {
            let server = ServerName::try_from(name.as_str())
                .map_err(|e| format!("{name:?} is no server name: {e}"))?;
            for (at, when) in [(now, "now"), (now + renew_before, "soon")] {
                let at = UnixTime::since_unix_epoch(
                    at.duration_since(SystemTime::UNIX_EPOCH)
                        .unwrap_or_default(),
                );
                verifier
                    .verify_server_cert(leaf, chain, &server, &[], at)
                    .map_err(|e| format!("its certificate is not valid for {name} {when}: {e}"))?;
            }
        }
        Ok(loaded)
    }
}

/// The end of a certificate's validity (`tbsCertificate.validity.notAfter`), read off
/// its DER; `None` when that is not where X.509 puts it.
fn not_after(der: &[u8]) -> Option<SystemTime> {
    let (0x30, certificate, _) = tlv(der)? else {
        return None;
    };
    let (0x30, tbs, _) = tlv(certificate)? else {
        return None;
    };
    // The version ([0], optional), then the serial number, the signature's algorithm
    // and the issuer before the validity.
    let (tag, _, after_version) = tlv(tbs)?;
    let mut rest = if tag == 0xa0 { after_version } else { tbs };
    for _ in 0..3 {
        rest = tlv(rest)?.2;
    }
    let (0x30, validity, _) = tlv(rest)? else {
        return None;
    };
    let (_, _, after_start) = tlv(validity)?;
    let (tag, time, _) = tlv(after_start)?;
    let time = std::str::from_utf8(time).ok()?.strip_suffix('Z')?;
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let text = time.get(range)?;
        text.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| text.parse().ok())?
    };
    // UTCTime (YYMMDDHHMMSS, 1950-2049) or GeneralizedTime (YYYYMMDDHHMMSS).
    let (year, rest_at) = match (tag, time.len()) {
        (0x17, 12) => {
            let yy = digits(0..2)?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, 2)
        }
        (0x18, 14) => (digits(0..4)?, 4),
        _ => return None,
    };
    let field = |i: usize| digits(rest_at + 2 * i..rest_at + 2 * i + 2);
    let end = chrono::NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, field(0)?, field(1)?)?
        .and_hms_opt(field(2)?, field(3)?, field(4)?)?
        .and_utc();
    let seconds = u64::try_from(end.timestamp()).ok()?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// One DER element: its tag, its content, and what follows it.
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let (bytes, rest) = rest.split_at_checked(usize::from(first & 0x7f))?;
        if bytes.is_empty() || bytes.len() > 4 {
            return None;
        }
        let length = bytes
            .iter()
            .fold(0usize, |length, byte| (length << 8) | usize::from(*byte));
        (length, rest)
    };
    let (content, rest) = rest.split_at_checked(length)?;
    Some((tag, content, rest))
}

/// Parameters valid from a day ago (clocks differ) for `validity`, in whole days.
fn dates(validity: Duration) -> rcgen::CertificateParams {
    let mut params = rcgen::CertificateParams::default();
    let today = chrono::Utc::now().date_naive();
    let day = |date: chrono::NaiveDate| {
        use chrono::Datelike;
        rcgen::date_time_ymd(
            date.year(),
            u8::try_from(date.month()).unwrap_or(1),
            u8::try_from(date.day()).unwrap_or(1),
        )
    };
    let days = validity.as_secs() / (24 * 3600);
    params.not_before = day(today - chrono::Days::new(1));
    params.not_after = day(today + chrono::Days::new(days));
    params
}

fn ca_params(validity: Duration) -> Result<rcgen::CertificateParams, rcgen::Error> {
    let mut ca = dates(validity);
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    ca.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    ca.distinguished_name = rcgen::DistinguishedName::new();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, CA_NAME);
    Ok(ca)
}

/// A serving certificate for `names` signed by `ca`, and its key (PEM).
fn serve(
    names: &[String],
    validity: Duration,
    ca: &rcgen::Certificate,
    ca_key: &rcgen::KeyPair,
) -> Result<(String, String), rcgen::Error> {
    let key = rcgen::KeyPair::generate()?;
    let mut leaf = dates(validity);
    leaf.subject_alt_names = rcgen::CertificateParams::new(names.to_vec())?.subject_alt_names;
    leaf.distinguished_name = rcgen::DistinguishedName::new();
    leaf.distinguished_name.push(
        rcgen::DnType::CommonName,
        names.first().map_or("kapsel-admission", String::as_str),
    );
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let leaf = leaf.signed_by(&key, ca, ca_key)?;
    Ok((leaf.pem(), key.serialize_pem()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<String> {
        vec!["kapsel.default.svc".to_owned(), "127.0.0.1".to_owned()]
    }

    #[test]
    fn a_serving_certificate_near_its_end_is_renewed_under_the_same_ca() {
        let day = Duration::from_secs(24 * 3600);
        let short = Validity {
            serving: 2 * day,
            ..Validity::default()
        };
        let material = Material::generate(&names(), short).unwrap();
        let why = material.check(&names(), short.renew_before).unwrap_err();
        assert!(why.contains("soon"), "{why}");
        assert!(material.check(&names(), Duration::ZERO).is_ok());

        let renewed = material.renewed(&names(), Validity::default()).unwrap();
        assert_eq!(renewed.ca_crt, material.ca_crt);
        assert_ne!(renewed.tls_crt, material.tls_crt);
        assert!(renewed.check(&names(), short.renew_before).is_ok());

        // A CA near its own end is not kept.
        let old_ca = Validity {
            ca: 2 * day,
            ..short
        };
        let material = Material::generate(&names(), old_ca).unwrap();
        assert_eq!(material.renewed(&names(), Validity::default()), None);
        // Nor one without its key.
        let keyless = Material {
            ca_key: String::new(),
            ..Material::generate(&names(), short).unwrap()
        };
        assert_eq!(keyless.renewed(&names(), Validity::default()), None);
    }

    #[test]
    fn the_end_of_validity_is_read_off_the_der() {
        let key = rcgen::KeyPair::generate().unwrap();
        for (year, month, day) in [(2049, 12, 31), (2050, 1, 2), (1999, 6, 7), (4096, 1, 1)] {
            let mut params = rcgen::CertificateParams::new(vec!["a".to_owned()]).unwrap();
            params.not_after = rcgen::date_time_ymd(year, month, day);
            let der = params.self_signed(&key).unwrap().der().to_vec();
            let expected = chrono::NaiveDate::from_ymd_opt(year, month.into(), day.into())
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc();
            let read = not_after(&der).map(chrono::DateTime::<chrono::Utc>::from);
            assert_eq!(read, Some(expected));
            for cut in [0, 1, 10, der.len() / 2] {
                let _ = not_after(&der[..cut]);
            }
        }
        assert_eq!(not_after(b"\x30\x84\xff\xff\xff\xff"), None);
        assert_eq!(not_after(b""), None);
    }

    #[test]
    fn the_check_wants_every_name() {
        let material = Material::generate(&names()[..1], Validity::default()).unwrap();
        let why = material.check(&names(), Duration::ZERO).unwrap_err();
        assert!(why.contains("not valid for 127.0.0.1 now"), "{why}");
        assert!(material.check(&names()[..1], Duration::ZERO).is_ok());
    }
}
