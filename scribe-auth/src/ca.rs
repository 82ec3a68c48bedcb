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
    ExtendedKeyUsagePurpose, Ia5String, IsCa, KeyPair, KeyUsagePurpose, PublicKeyData, SanType,
    SerialNumber, PKCS_ECDSA_P256_SHA256,
};

use crate::error::AuthError;
use crate::ids::{Id, KeyId};
use crate::rows::{CaFamily, CaRow, CredentialKind, NEVER_EXPIRES};

pub(crate) fn cert_err(e: rcgen::Error) -> AuthError {
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
    pub(crate) key: KeyPair,
    pub(crate) cert: Certificate,
    pub(crate) trust_domain: String,
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

/// A P-256 public key that arrived as SubjectPublicKeyInfo DER (a client's
/// login key), checked and kept as its uncompressed point for rcgen.
pub struct P256PublicKey {
    point: Vec<u8>,
}

impl P256PublicKey {
    /// Parse and check SubjectPublicKeyInfo DER of a P-256 key.
    pub fn from_spki_der(der: &[u8]) -> Result<P256PublicKey, AuthError> {
        use p256::elliptic_curve::sec1::ToEncodedPoint;
        use p256::pkcs8::DecodePublicKey;
        let key = p256::PublicKey::from_public_key_der(der).map_err(|e| AuthError::Invalid {
            what: "public key",
            reason: format!("not a P-256 SubjectPublicKeyInfo: {e}"),
        })?;
        Ok(P256PublicKey {
            point: key.to_encoded_point(false).as_bytes().to_vec(),
        })
    }
}

impl PublicKeyData for P256PublicKey {
    fn der_bytes(&self) -> &[u8] {
        &self.point
    }
    fn algorithm(&self) -> &rcgen::SignatureAlgorithm {
        &PKCS_ECDSA_P256_SHA256
    }
}

/// The URI a credential certificate names: `scribe-credential://<trust
/// domain>/<credential id>`.
pub fn credential_uri(trust_domain: &str, credential: Id) -> String {
    format!("scribe-credential://{trust_domain}/{}", credential.hex())
}

impl Signer {
    /// A session credential certificate (`docs/auth.md#credential-certificates`):
    /// subject `CN=<credential id hex>, O=<trust domain>, OU=session`, SAN URI
    /// `scribe-credential://<trust domain>/<credential id>`, serial = the
    /// credential id, valid from `created_ms` to `expires_ms`, client
    /// authentication only, signed by this (credential) CA.
    pub fn issue_session(
        &self,
        public_key: &impl PublicKeyData,
        credential: Id,
        created_ms: u64,
        expires_ms: u64,
    ) -> Result<String, AuthError> {
        self.issue_credential(
            public_key,
            credential,
            CredentialKind::Session,
            created_ms,
            expires_ms,
        )
    }

    /// A credential certificate in the session layout for any `kind`
    /// (`OU=<kind>`): sessions and automation credentials
    /// (`docs/auth.md#credential-certificates`).
    pub fn issue_credential(
        &self,
        public_key: &impl PublicKeyData,
        credential: Id,
        kind: CredentialKind,
        created_ms: u64,
        expires_ms: u64,
    ) -> Result<String, AuthError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, credential.hex());
        dn.push(DnType::OrganizationName, self.trust_domain.as_str());
        dn.push(DnType::OrganizationalUnitName, kind.as_str());
        params.distinguished_name = dn;
        params.subject_alt_names = vec![SanType::URI(
            Ia5String::try_from(credential_uri(&self.trust_domain, credential))
                .map_err(cert_err)?,
        )];
        params.serial_number = Some(SerialNumber::from(credential.0.to_vec()));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = to_time(created_ms)?;
        params.not_after = to_time(expires_ms)?;
        Ok(params
            .signed_by(public_key, &self.cert, &self.key)
            .map_err(cert_err)?
            .pem())
    }

    /// The service's TLS serving certificate (signed by the access CA) for
    /// `hosts` (DNS names or IP addresses), with a fresh key: `(certificate
    /// PEM, PKCS#8 key PEM)`. Made at each `serve` start, never stored.
    pub fn issue_tls_server(
        &self,
        hosts: &[String],
        now_ms: u64,
    ) -> Result<(String, String), AuthError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256).map_err(cert_err)?;
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            format!("{} scribe-auth service", self.trust_domain),
        );
        params.distinguished_name = dn;
        for h in hosts {
            params
                .subject_alt_names
                .push(match h.parse::<std::net::IpAddr>() {
                    Ok(ip) => SanType::IpAddress(ip),
                    Err(_) => SanType::DnsName(Ia5String::try_from(h.as_str()).map_err(cert_err)?),
                });
        }
        params.serial_number = Some(SerialNumber::from(Id::random().0.to_vec()));
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        params.not_before = to_time(now_ms.saturating_sub(3_600_000))?;
        params.not_after = to_time(now_ms.saturating_add(400 * 86_400_000))?;
        let cert = params
            .signed_by(&key, &self.cert, &self.key)
            .map_err(cert_err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

pub(crate) fn to_time(ms: u64) -> Result<time::OffsetDateTime, AuthError> {
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
