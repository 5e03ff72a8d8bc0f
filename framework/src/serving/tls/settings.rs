//! The `--tls-min-version`, `--tls-cipher-suites`, `--tls-curve-preferences`, `--tls-sni-cert-key`
//! and HTTP/2 flags, read with Go's names and mapped onto rustls, or refused by value where rustls
//! cannot do what the flag asks (TLS 1.0/1.1, CBC/RSA-kex/3DES/RC4 suites, P-521, IP SNI patterns).
//!
//! As in Go, the cipher-suite list governs TLS 1.2 only: TLS 1.3 suites are always enabled and
//! naming them is accepted with no effect.

use std::path::PathBuf;

use tokio_rustls::rustls::crypto::ring::{cipher_suite as cs, kx_group};
use tokio_rustls::rustls::crypto::{CryptoProvider, SupportedKxGroup, ring};
use tokio_rustls::rustls::{SupportedCipherSuite, SupportedProtocolVersion, version};

static TLS12_AND_13: &[&SupportedProtocolVersion] = &[&version::TLS13, &version::TLS12];
static TLS13_ONLY: &[&SupportedProtocolVersion] = &[&version::TLS13];

/// Go's `http2` default for `MaxConcurrentStreams`, which upstream's `0` means.
const GO_HTTP2_MAX_STREAMS: u32 = 250;

/// Go cipher-suite names (crypto/tls, plus component-base's two aliases) and what rustls offers
/// for each; `None` means Go knows the suite and rustls does not implement it.
const CIPHER_SUITES: &[(&str, Option<SupportedCipherSuite>)] = &[
    ("TLS_AES_128_GCM_SHA256", Some(cs::TLS13_AES_128_GCM_SHA256)),
    ("TLS_AES_256_GCM_SHA384", Some(cs::TLS13_AES_256_GCM_SHA384)),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        Some(cs::TLS13_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
        Some(cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
        Some(cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
        Some(cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        Some(cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
        Some(cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
        Some(cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    (
        "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
        Some(cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256),
    ),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_RSA_WITH_RC4_128_SHA", None),
    ("TLS_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_256_CBC_SHA", None),
    ("TLS_RSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_RSA_WITH_AES_128_GCM_SHA256", None),
    ("TLS_RSA_WITH_AES_256_GCM_SHA384", None),
    ("TLS_ECDHE_ECDSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_RSA_WITH_RC4_128_SHA", None),
    ("TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA", None),
    ("TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", None),
    ("TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256", None),
];

/// Go curve names and numbers (`tls.CurveID`) and the rustls group for each.
const CURVES: &[(&str, u16, Option<&dyn SupportedKxGroup>)] = &[
    ("X25519", 29, Some(kx_group::X25519)),
    ("CurveP256", 23, Some(kx_group::SECP256R1)),
    ("CurveP384", 24, Some(kx_group::SECP384R1)),
    ("CurveP521", 25, None),
    ("X25519MLKEM768", 4588, None),
];

/// One `--tls-sni-cert-key` value: a certificate/key pair and the names it serves (empty: the
/// names are taken from the certificate).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SniCertKey {
    /// The certificate chain file.
    pub cert: PathBuf,
    /// The private key file.
    pub key: PathBuf,
    /// Explicit domain patterns (`foo.com`, `*.foo.com`), lower-cased.
    pub names: Vec<String>,
}

/// What the TLS flags ask of a server's TLS stack.
#[derive(Clone, Debug)]
pub struct TlsSettings {
    versions: &'static [&'static SupportedProtocolVersion],
    tls12_suites: Option<Vec<SupportedCipherSuite>>,
    kx_groups: Option<Vec<&'static dyn SupportedKxGroup>>,
    /// Extra certificates chosen by SNI.
    pub sni: Vec<SniCertKey>,
    /// Offer HTTP/2 by ALPN (off with `--disable-http2-serving`).
    pub http2: bool,
    /// HTTP/2 concurrent-stream limit advertised to clients.
    pub http2_max_streams: u32,
}

impl Default for TlsSettings {
    /// Upstream's defaults: TLS 1.2 and 1.3, the library's suites and groups, HTTP/2 with 250 streams.
    fn default() -> Self {
        TlsSettings {
            versions: TLS12_AND_13,
            tls12_suites: None,
            kx_groups: None,
            sni: Vec::new(),
            http2: true,
            http2_max_streams: GO_HTTP2_MAX_STREAMS,
        }
    }
}

impl TlsSettings {
    /// Reads the flags' values; every value this build cannot honour is reported, named.
    pub fn from_flags(
        min_version: Option<&str>,
        cipher_suites: &[String],
        curves: &[String],
        sni: &[String],
        http2: bool,
        http2_max_streams: u32,
    ) -> Result<Self, Vec<String>> {
        let mut errors = Vec::new();
        let mut settings = TlsSettings {
            http2,
            http2_max_streams: match http2_max_streams {
                0 => GO_HTTP2_MAX_STREAMS,
                n => n,
            },
            ..TlsSettings::default()
        };
        match min_version.map(str::trim).unwrap_or_default() {
            "" | "VersionTLS12" => {}
            "VersionTLS13" => settings.versions = TLS13_ONLY,
            v @ ("VersionTLS10" | "VersionTLS11") => errors.push(format!(
                "--tls-min-version={v}: this build's TLS library (rustls) speaks only TLS 1.2 and 1.3; use VersionTLS12 or VersionTLS13"
            )),
            v => errors.push(format!(
                "--tls-min-version: unknown tls version {v:?} (possible values: VersionTLS12, VersionTLS13)"
            )),
        }
        if !cipher_suites.is_empty() {
            let mut tls12 = Vec::new();
            for name in cipher_suites {
                match CIPHER_SUITES.iter().find(|(n, _)| n == name) {
                    Some((_, Some(suite))) => {
                        if matches!(suite, SupportedCipherSuite::Tls12(_)) && !tls12.contains(suite)
                        {
                            tls12.push(*suite);
                        }
                    }
                    Some((_, None)) => errors.push(format!(
                        "--tls-cipher-suites: {name} is not implemented by this build's TLS library (rustls); use only {}",
                        supported_suite_names()
                    )),
                    None => errors.push(format!(
                        "--tls-cipher-suites: Cipher suite {name} not supported or doesn't exist"
                    )),
                }
            }
            if settings.versions.len() == 1 && !tls12.is_empty() {
                errors.push(
                    "--tls-cipher-suites names TLS 1.2 suites, which --tls-min-version=VersionTLS13 never uses; drop one of them"
                        .to_string(),
                );
            }
            if tls12.is_empty() && settings.versions.len() > 1 {
                // Only TLS 1.3 names: Go then still offers TLS 1.2 with no suite, i.e. not at all.
                settings.versions = TLS13_ONLY;
            }
            settings.tls12_suites = Some(tls12);
        }
        if !curves.is_empty() {
            let mut groups = Vec::new();
            for name in curves {
                let found = CURVES
                    .iter()
                    .find(|(n, id, _)| n == name || name.parse::<u16>().ok() == Some(*id));
                match found {
                    Some((_, _, Some(group))) => groups.push(*group),
                    Some((n, _, None)) => errors.push(format!(
                        "--tls-curve-preferences: {name} ({n}) is not implemented by this build's TLS library (rustls with ring); use X25519, CurveP256 or CurveP384"
                    )),
                    None => errors.push(format!(
                        "--tls-curve-preferences: unknown curve {name:?} (use X25519, CurveP256 or CurveP384, or their numbers 29, 23, 24)"
                    )),
                }
            }
            settings.kx_groups = Some(groups);
        }
        for value in sni {
            match parse_sni(value) {
                Ok(pair) => settings.sni.push(pair),
                Err(e) => errors.push(format!("--tls-sni-cert-key={value}: {e}")),
            }
        }
        if errors.is_empty() {
            Ok(settings)
        } else {
            Err(errors)
        }
    }

    /// The ring provider narrowed to the chosen suites and groups.
    pub(super) fn provider(&self) -> CryptoProvider {
        let mut provider = ring::default_provider();
        if let Some(tls12) = &self.tls12_suites {
            provider.cipher_suites.retain(|s| match s {
                SupportedCipherSuite::Tls13(_) => true,
                SupportedCipherSuite::Tls12(_) => tls12.contains(s),
            });
        }
        if let Some(groups) = &self.kx_groups {
            provider.kx_groups = groups.clone();
        }
        provider
    }

    /// The protocol versions to enable.
    pub(super) fn versions(&self) -> &'static [&'static SupportedProtocolVersion] {
        self.versions
    }

    /// ALPN protocols, most preferred first.
    pub(super) fn alpn(&self) -> Vec<Vec<u8>> {
        match self.http2 {
            true => vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            false => vec![b"http/1.1".to_vec()],
        }
    }
}

fn supported_suite_names() -> String {
    let names: Vec<&str> = CIPHER_SUITES
        .iter()
        .filter(|(n, s)| s.is_some() && !n.ends_with("POLY1305"))
        .map(|(n, _)| *n)
        .collect();
    names.join(", ")
}

/// `cert,key` or `cert,key:name1,name2`, as component-base's `NamedCertKey`.
fn parse_sni(value: &str) -> Result<SniCertKey, String> {
    let (files, names) = match value.split_once(':') {
        Some((files, names)) => (files, names),
        None => (value, ""),
    };
    let (cert, key) = files
        .split_once(',')
        .filter(|(c, k)| !c.trim().is_empty() && !k.trim().is_empty() && !k.contains(','))
        .ok_or("expected \"cert-file,key-file\" optionally followed by \":name1,name2\"")?;
    let names: Vec<String> = names
        .split(',')
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect();
    if let Some(ip) = names.iter().find(|n| n.parse::<std::net::IpAddr>().is_ok()) {
        return Err(format!(
            "the IP pattern {ip} selects a certificate by the connection's local address, which this build's TLS library (rustls) cannot see; serve IP clients with --tls-cert-file instead"
        ));
    }
    Ok(SniCertKey {
        cert: PathBuf::from(cert.trim()),
        key: PathBuf::from(key.trim()),
        names,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn defaults_are_tls12_and_13_with_http2() {
        let s = TlsSettings::from_flags(None, &[], &[], &[], true, 0).unwrap();
        assert_eq!(s.versions().len(), 2);
        assert_eq!(s.http2_max_streams, 250);
        assert_eq!(s.alpn()[0], b"h2");
        assert_eq!(s.provider().cipher_suites.len(), 9);
    }

    #[test]
    fn cipher_list_narrows_tls12_and_keeps_tls13() {
        let s = TlsSettings::from_flags(
            Some("VersionTLS12"),
            &strings(&[
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                "TLS_AES_128_GCM_SHA256",
            ]),
            &strings(&["X25519", "23"]),
            &[],
            false,
            7,
        )
        .unwrap();
        let p = s.provider();
        assert_eq!(p.cipher_suites.len(), 4, "3 TLS 1.3 + 1 TLS 1.2");
        assert_eq!(p.kx_groups.len(), 2);
        assert_eq!(s.alpn(), vec![b"http/1.1".to_vec()]);
        assert_eq!(s.http2_max_streams, 7);
    }

    #[test]
    fn refusals_name_the_value() {
        let errors = TlsSettings::from_flags(
            Some("VersionTLS11"),
            &strings(&["TLS_RSA_WITH_3DES_EDE_CBC_SHA", "NOPE"]),
            &strings(&["CurveP521", "P999"]),
            &strings(&["a.crt", "a.crt,a.key:10.0.0.1"]),
            true,
            0,
        )
        .unwrap_err();
        assert_eq!(errors.len(), 7, "{errors:#?}");
        assert!(errors[0].contains("VersionTLS11"));
        assert!(errors[1].contains("TLS_RSA_WITH_3DES_EDE_CBC_SHA is not implemented"));
        assert!(errors[2].contains("Cipher suite NOPE not supported or doesn't exist"));
        assert!(errors[3].contains("CurveP521"));
        assert!(errors[4].contains("P999"));
        assert!(errors[5].contains("--tls-sni-cert-key=a.crt:"));
        assert!(errors[6].contains("10.0.0.1"));
        let tls13 = TlsSettings::from_flags(
            Some("VersionTLS13"),
            &strings(&["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]),
            &[],
            &[],
            true,
            0,
        )
        .unwrap_err();
        assert!(tls13[0].contains("never uses"), "{tls13:?}");
    }

    #[test]
    fn sni_values_parse_as_component_base() {
        assert_eq!(
            parse_sni("foo.crt,foo.key:*.Foo.com, foo.com").unwrap(),
            SniCertKey {
                cert: "foo.crt".into(),
                key: "foo.key".into(),
                names: strings(&["*.foo.com", "foo.com"]),
            }
        );
        assert!(parse_sni("a.crt,a.key").unwrap().names.is_empty());
    }
}
