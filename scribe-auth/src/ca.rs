//! The certificate authorities: p256 (ECDSA P-256 with SHA-256) CA
//! certificates with PKCS#8 keys, made with rcgen.
//!
//! Rows `ca/credential/NNNN` and `ca/access/NNNN` hold `[certificate PEM,
//! PKCS#8 private key PEM]`; the highest index of a family signs, every
//! row is trusted. A CA certificate's subject is `CN=<trust domain> scribe-auth
//! <family> CA NNNN`, it is valid from 1975 to 4096 (rcgen's defaults: a CA
//! is retired by adding a higher index, not by expiry), basic constraints CA
//! without a path length, key usage keyCertSign, cRLSign, digitalSignature.

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose, PublicKeyData, SerialNumber,
    PKCS_ECDSA_P256_SHA256,
};

use crate::error::AuthError;
use crate::ids::{Id, KeyId};
use crate::rows::{CaFamily, CaRow, CredentialKind, NEVER_EXPIRES};

fn cert_err(e: rcgen::Error) -> AuthError {
    AuthError::Certificate(e.to_string())
}

fn ca_params(trust_domain: &str, family: CaFamily, index: u16) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!(
            "{trust_domain} scribe-auth {} CA {index:04}",
            family.as_str()
        ),
    );
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// A new CA of `family` at `index`.
pub fn generate(trust_domain: &str, family: CaFamily, index: u16) -> Result<CaRow, AuthError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(cert_err)?;
    let mut params = ca_params(trust_domain, family, index);
    params.serial_number = Some(SerialNumber::from(Id::random().0.to_vec()));
    let cert = params.self_signed(&key).map_err(cert_err)?;
    Ok(CaRow {
        certificate_pem: cert.pem(),
        private_key_pem: key.serialize_pem(),
    })
}

/// A signing CA rebuilt from its row (issuer name and key as stored).
pub struct Signer {
    key: KeyPair,
    cert: Certificate,
    trust_domain: String,
}

impl Signer {
    pub fn new(
        row: &CaRow,
        trust_domain: &str,
        family: CaFamily,
        index: u16,
    ) -> Result<Signer, AuthError> {
        let key = KeyPair::from_pem(&row.private_key_pem).map_err(cert_err)?;
        // Only the subject name, key identifier method and key of the issuer
        // enter a signed certificate: rebuilding them from the same
        // deterministic parameters and the stored key names the stored CA.
        let cert = ca_params(trust_domain, family, index)
            .self_signed(&key)
            .map_err(cert_err)?;
        Ok(Signer {
            key,
            cert,
            trust_domain: trust_domain.to_owned(),
        })
    }

    /// A credential certificate for `public_key`: subject `CN=<subject>,
    /// O=<trust domain>, OU=<kind>`, serial = the credential id, valid from
    /// `created_ms` to `expires_ms` (4096 for one that never expires), client
    /// and server authentication.
    pub fn issue(
        &self,
        public_key: &impl PublicKeyData,
        credential: Id,
        kind: CredentialKind,
        subject: &str,
        created_ms: u64,
        expires_ms: u64,
    ) -> Result<String, AuthError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, subject);
        dn.push(DnType::OrganizationName, self.trust_domain.as_str());
        dn.push(DnType::OrganizationalUnitName, kind.as_str());
        params.distinguished_name = dn;
        params.serial_number = Some(SerialNumber::from(credential.0.to_vec()));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ClientAuth,
            ExtendedKeyUsagePurpose::ServerAuth,
        ];
        params.use_authority_key_identifier_extension = true;
        params.not_before = to_time(created_ms)?;
        if expires_ms != NEVER_EXPIRES {
            params.not_after = to_time(expires_ms)?;
        }
        Ok(params
            .signed_by(public_key, &self.cert, &self.key)
            .map_err(cert_err)?
            .pem())
    }
}

fn to_time(ms: u64) -> Result<time::OffsetDateTime, AuthError> {
    // Past year 9999 X.509 times cannot be written; clamp.
    let ms = ms.min(253_402_300_799_000);
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(|e| AuthError::Certificate(e.to_string()))
}

/// A fresh p256 key pair for a credential made on this side (the bootstrap
/// administrator's), with its key id.
pub fn generate_key() -> Result<(KeyPair, KeyId), AuthError> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(cert_err)?;
    let id = KeyId::of_spki_der(&key.public_key_der());
    Ok((key, id))
}
