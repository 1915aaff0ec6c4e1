//! The HTTP receiver behind TLS that requires a client certificate (mutual TLS).
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::{
    RootCertStore, ServerConfig,
    pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject},
    server::WebPkiClientVerifier,
};
use tokio::net::TcpListener;

pub struct Files {
    ca: std::path::PathBuf,
    cert: std::path::PathBuf,
    key: std::path::PathBuf,
}

impl From<&crate::tls::Certs> for Files {
    fn from(c: &crate::tls::Certs) -> Self {
        Self {
            ca: c.ca.clone(),
            cert: c.server_cert.clone(),
            key: c.server_key.clone(),
        }
    }
}

fn config(f: &Files) -> ServerConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&f.ca).expect("CA file") {
        roots.add(c.expect("CA certificate")).expect("CA added");
    }
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .expect("client verifier");
    let certs: Vec<CertificateDer> = CertificateDer::pem_file_iter(&f.cert)
        .expect("server certificate")
        .map(|c| c.expect("certificate"))
        .collect();
    let key = PrivateKeyDer::from_pem_file(&f.key).expect("server key");
    let mut cfg = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_client_cert_verifier(verifier)
        .with_single_cert(certs, key)
        .expect("server identity");
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    cfg
}

pub async fn serve(listener: TcpListener, app: axum::Router, files: Files) {
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config(&files)));
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let (acceptor, app) = (acceptor.clone(), app.clone());
        tokio::spawn(async move {
            // A client without an accepted certificate fails here: nothing is served.
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let svc = hyper_util::service::TowerToHyperService::new(app);
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), svc)
                .await;
        });
    }
}
