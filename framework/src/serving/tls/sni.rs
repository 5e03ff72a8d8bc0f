//! Which certificate a handshake gets, as upstream's dynamic serving picks it by SNI
//! (`--tls-sni-cert-key`, with Go's rules): exact names, then the name with its first label
//! replaced by `*`, else the default certificate. Explicit patterns beat names read from a
//! certificate; earlier flags beat later ones.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_rustls::rustls::sign::CertifiedKey;

use crate::serving::x509::cert_names;

/// One loaded set of certificates: the default and those chosen by server name.
#[derive(Debug)]
pub(super) struct CertSet {
    default: Arc<CertifiedKey>,
    by_name: HashMap<String, Arc<CertifiedKey>>,
}

impl CertSet {
    /// `pairs`: each SNI certificate with its explicit patterns (empty: read from the certificate).
    pub(super) fn new(
        default: Arc<CertifiedKey>,
        pairs: Vec<(Arc<CertifiedKey>, Vec<String>)>,
    ) -> Self {
        let mut by_name = HashMap::new();
        // Extracted names first, so explicit patterns overwrite them.
        for (key, names) in pairs.iter().rev() {
            if names.is_empty()
                && let Some(leaf) = key.cert.first()
                && let Some(found) = cert_names(leaf)
            {
                let cn = found.common_name.to_ascii_lowercase();
                let usable_cn = !cn.is_empty() && cn.parse::<std::net::IpAddr>().is_err();
                for name in usable_cn
                    .then_some(cn)
                    .into_iter()
                    .chain(found.dns_names.iter().map(|n| n.to_ascii_lowercase()))
                {
                    by_name.insert(name, key.clone());
                }
            }
        }
        for (key, names) in pairs.iter().rev() {
            for name in names {
                by_name.insert(name.clone(), key.clone());
            }
        }
        CertSet { default, by_name }
    }

    /// The same SNI certificates with another default.
    pub(super) fn with_default(&self, default: Arc<CertifiedKey>) -> Self {
        CertSet {
            default,
            by_name: self.by_name.clone(),
        }
    }

    /// The certificate for a client that asked for `server_name`.
    pub(super) fn lookup(&self, server_name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = server_name.map(str::to_ascii_lowercase) else {
            return self.default.clone();
        };
        if let Some(key) = self.by_name.get(&name) {
            return key.clone();
        }
        if let Some((_, rest)) = name.split_once('.')
            && let Some(key) = self.by_name.get(&format!("*.{rest}"))
        {
            return key.clone();
        }
        self.default.clone()
    }
}

#[cfg(test)]
mod tests {
    use rcgen::{CertificateParams, KeyPair};
    use tokio_rustls::rustls::crypto::ring;
    use tokio_rustls::rustls::pki_types::PrivateKeyDer;

    use super::*;

    fn key_for(names: &[&str]) -> Arc<CertifiedKey> {
        let key = KeyPair::generate().unwrap();
        let params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        let cert = params.self_signed(&key).unwrap();
        let der = PrivateKeyDer::try_from(key.serialize_der()).unwrap();
        Arc::new(
            CertifiedKey::from_der(vec![cert.der().clone()], der, &ring::default_provider())
                .unwrap(),
        )
    }

    #[test]
    fn exact_beats_wildcard_and_explicit_beats_extracted() {
        let default = key_for(&["localhost"]);
        let foo = key_for(&["foo.com"]);
        let wild = key_for(&["ignored.example"]);
        let explicit = key_for(&["bar.com"]);
        let r = CertSet::new(
            default.clone(),
            vec![
                (foo.clone(), vec![]),
                (wild.clone(), vec!["*.foo.com".into()]),
                (explicit.clone(), vec!["foo.com".into()]),
            ],
        );
        let same = |a: &Arc<CertifiedKey>, b: &Arc<CertifiedKey>| Arc::ptr_eq(a, b);
        assert!(
            same(&r.lookup(Some("FOO.com")), &explicit),
            "explicit beats extracted"
        );
        assert!(same(&r.lookup(Some("a.foo.com")), &wild));
        assert!(
            same(&r.lookup(Some("a.b.foo.com")), &default),
            "one label only"
        );
        assert!(same(&r.lookup(None), &default));
        assert!(
            same(&r.lookup(Some("ignored.example")), &default),
            "explicit names replace extraction"
        );
        let other = key_for(&["localhost"]);
        let swapped = r.with_default(other.clone());
        assert!(same(&swapped.lookup(None), &other));
        assert!(same(&swapped.lookup(Some("a.foo.com")), &wild));
    }
}
