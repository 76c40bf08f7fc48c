//! A CA and a server certificate for 127.0.0.1, made for one test and written to a
//! directory of their own that is removed with them.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use sluice_redis::local::ServerTls;

/// PEM files in a directory that lives as long as this value.
pub struct Certs {
    pub dir: PathBuf,
    pub server: ServerTls,
}

impl Certs {
    /// A fresh CA and a server certificate it signed, for `127.0.0.1` and `localhost`.
    pub fn generate() -> Self {
        let dir =
            std::env::temp_dir().join(format!("sluice-redis-tls-{}-{}", std::process::id(), rand::random::<u64>()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let server_cert = CertificateParams::new(names).unwrap().signed_by(&server_key, &ca).unwrap();
        let server = ServerTls {
            cert_file: write(&dir, "server.pem", &server_cert.pem()),
            key_file: write(&dir, "server.key", &server_key.serialize_pem()),
            ca_file: write(&dir, "ca.pem", &ca.pem()),
        };
        Self { dir, server }
    }
}

fn write(dir: &Path, name: &str, pem: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    path
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
