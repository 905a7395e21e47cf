//! TLS to the server, configured from the address as libpq configures it: `sslmode`
//! (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`) and `sslrootcert`, with rustls
//! (no OpenSSL) and the system's roots unless a root file is named.
//!
//! As in libpq: `prefer` and `require` encrypt without checking who answers (`require` with a
//! root file checks the chain, as `verify-ca`); `verify-ca` checks that a trusted root signed
//! the server's certificate; `verify-full` checks that too, and that the certificate is for the
//! host connected to. `prefer` is the default, and falls back to no TLS where the server offers
//! none.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bounda::store::StoreError;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// How much of TLS a connection asks for: libpq's `sslmode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Result<Mode, StoreError> {
        Ok(match value {
            "disable" => Mode::Disable,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            other => {
                return Err(StoreError::new(format!(
                    "`sslmode={other}` in the database address is not a mode: use `disable`, \
                     `prefer`, `require`, `verify-ca` or `verify-full`"
                )));
            }
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS settings of an address, taken out of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) mode: Mode,
    /// `sslrootcert`: a PEM file of the roots to trust instead of the system's.
    pub(crate) root: Option<PathBuf>,
}

impl Default for Settings {
    /// libpq's default: TLS where the server offers it, nothing checked.
    fn default() -> Settings {
        Settings {
            mode: Mode::Prefer,
            root: None,
        }
    }
}

impl Settings {
    /// Takes `key=value` from an address if it is a TLS setting: whether it was one.
    pub(crate) fn take(&mut self, key: &str, value: &str) -> Result<bool, StoreError> {
        match key {
            "sslmode" => self.mode = Mode::parse(value)?,
            "sslrootcert" => self.root = Some(PathBuf::from(value)),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The mode `tokio_postgres` negotiates with: whether TLS is tried, and whether it must be.
    pub(crate) fn negotiation(&self) -> SslMode {
        match self.mode {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }

    /// The connector, or `None` when TLS is disabled.
    pub(crate) fn connector(&self) -> Result<Option<MakeRustlsConnect>, StoreError> {
        if self.mode == Mode::Disable {
            return Ok(None);
        }
        let provider = Arc::new(ring());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| StoreError::with_source("cannot set up TLS", e))?;
        // `require` checks the chain only when a root file is named, as libpq does.
        let checks = match (self.mode, &self.root) {
            (Mode::Prefer | Mode::Require, None) => Checks::Nothing,
            (Mode::Prefer | Mode::Require | Mode::VerifyCa, _) => Checks::Chain,
            (Mode::VerifyFull, _) => Checks::ChainAndName,
            (Mode::Disable, _) => return Ok(None),
        };
        let verifier: Arc<dyn ServerCertVerifier> = match checks {
            Checks::Nothing => Arc::new(Encrypted {
                algorithms: provider.signature_verification_algorithms,
            }),
            Checks::Chain | Checks::ChainAndName => {
                let roots = Arc::new(self.roots()?);
                let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
                    .build()
                    .map_err(|e| StoreError::with_source("cannot set up TLS", e))?;
                Arc::new(Verified {
                    webpki,
                    name: checks == Checks::ChainAndName,
                })
            }
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(Some(MakeRustlsConnect::new(config)))
    }

    /// The roots to trust: `sslrootcert`'s, or the system's.
    fn roots(&self) -> Result<RootCertStore, StoreError> {
        let mut roots = RootCertStore::empty();
        match &self.root {
            Some(path) => {
                let certificates = read_roots(path)?;
                roots.add_parsable_certificates(certificates);
                if roots.is_empty() {
                    return Err(StoreError::new(format!(
                        "`sslrootcert={}` holds no certificate to trust: name a PEM file of the \
                         certificate authority that signed the server's certificate",
                        path.display()
                    )));
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                roots.add_parsable_certificates(found.certs);
                if roots.is_empty() {
                    return Err(StoreError::new(format!(
                        "`sslmode={}` checks the server's certificate, and this system has no \
                         root certificates to check it with: install them (Debian: \
                         `ca-certificates`) or name the server's authority with `sslrootcert`",
                        self.mode.as_str()
                    )));
                }
            }
        }
        Ok(roots)
    }

    /// Why a connection that failed was refused by TLS, for an operator, if it was: `None` for
    /// any other failure.
    pub(crate) fn refusal(&self, error: &tokio_postgres::Error) -> Option<String> {
        let mut text = error.to_string();
        let mut cause = std::error::Error::source(error);
        while let Some(inner) = cause {
            text.push_str(&format!(": {inner}"));
            cause = inner.source();
        }
        if text.contains("server does not support TLS") {
            return Some(format!(
                "the server does not offer TLS, and `sslmode={}` asks for it: enable `ssl` on \
                 the server, or connect with `sslmode=prefer` on a private network",
                self.mode.as_str()
            ));
        }
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
                return Some(self.explained(tls));
            }
            if let Some(io) = cause.downcast_ref::<std::io::Error>()
                && let Some(tls) = io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>())
            {
                return Some(self.explained(tls));
            }
            source = cause.source();
        }
        None
    }

    fn explained(&self, error: &rustls::Error) -> String {
        let trusted = match &self.root {
            Some(path) => format!("the roots of `sslrootcert={}`", path.display()),
            None => "the system's roots".to_owned(),
        };
        match error {
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => {
                "the server's certificate is not for the host connected to (`sslmode=verify-full` \
                  checks the name): connect by a name the certificate lists, or have the server's \
                  certificate made for this one"
                    .to_owned()
            }
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
                "the server's certificate is not signed by an authority this client trusts \
                 ({trusted}): name the server's authority with `sslrootcert`"
            ),
            rustls::Error::InvalidCertificate(
                CertificateError::Expired | CertificateError::ExpiredContext { .. },
            ) => "the server's certificate has expired: renew it on the server".to_owned(),
            other => format!("TLS with the server failed: {other}"),
        }
    }
}

/// rustls's provider on `ring`, which builds without a C toolchain (`aws-lc-rs`, the other,
/// needs one), the provider the workspace's other TLS (the webhooks' client) uses too.
#[expect(
    deprecated,
    reason = "rustls 0.23.48 deprecates ring's provider for lacking post-quantum key exchange; \
              it is still maintained and what the rest of the workspace links"
)]
fn ring() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

/// What a verifier checks of the server's certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checks {
    Nothing,
    Chain,
    ChainAndName,
}

/// The roots of the PEM file at `path`.
fn read_roots(path: &Path) -> Result<Vec<CertificateDer<'static>>, StoreError> {
    CertificateDer::pem_file_iter(path)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            StoreError::new(format!(
                "cannot read `sslrootcert={}`: {e}; name a PEM file of the certificate \
                 authority that signed the server's certificate",
                path.display()
            ))
        })
}

/// Encrypts without checking who answers (`prefer`, `require`): the handshake's signatures are
/// still checked, so the session is the certificate holder's.
#[derive(Debug)]
struct Encrypted {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Encrypted {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Checks the chain to a trusted root (`verify-ca`), and the host name too (`verify-full`).
#[derive(Debug)]
struct Verified {
    webpki: Arc<WebPkiServerVerifier>,
    name: bool,
}

impl ServerCertVerifier for Verified {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let checked = self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        );
        match checked {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}
