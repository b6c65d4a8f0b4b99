//! The few facts about an X.509 certificate that the TLS check needs beyond
//! what rustls/webpki expose: its validity period, its CA flag, whether it
//! may serve TLS (extendedKeyUsage), whether it is self-issued, and the
//! common names of its subject and issuer (for messages). Read straight from
//! the DER by a small reader; pure, no clock.

/// What [`facts`] reads from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFacts {
    /// X.509 version: 1, 2 or 3.
    pub version: u8,
    /// `notBefore` and `notAfter`, in seconds since the Unix epoch.
    pub not_before: i64,
    pub not_after: i64,
    /// basicConstraints `cA` is TRUE.
    pub is_ca: bool,
    /// No extendedKeyUsage, or one that lists serverAuth (webpki's rule).
    pub server_auth: bool,
    /// It carries nameConstraints (binding the certificates it issues).
    pub name_constrained: bool,
    /// Subject and issuer are the same name (as `openssl req -x509` makes).
    pub self_issued: bool,
    pub subject_cn: Option<String>,
    pub issuer_cn: Option<String>,
}

const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;
const BOOLEAN: u8 = 0x01;
const OCTET_STRING: u8 = 0x04;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;
const VERSION_TAG: u8 = 0xA0;
const EXTENSIONS_TAG: u8 = 0xA3;

const BASIC_CONSTRAINTS: &[u8] = &[0x55, 0x1D, 0x13];
const EXT_KEY_USAGE: &[u8] = &[0x55, 0x1D, 0x25];
const NAME_CONSTRAINTS: &[u8] = &[0x55, 0x1D, 0x1E];
const SERVER_AUTH: &[u8] = &[0x2B, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01];
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

/// The facts of a DER certificate, or None when it cannot be read.
pub fn facts(der: &[u8]) -> Option<CertFacts> {
    let cert = Der(der).expect(SEQUENCE)?;
    let mut tbs = Der(Der(cert).expect(SEQUENCE)?);
    let version = match tbs.peek() {
        Some(VERSION_TAG) => {
            let explicit = tbs.next()?.1;
            1 + *Der(explicit).next()?.1.last()?
        }
        _ => 1,
    };
    tbs.next()?; // serialNumber
    tbs.next()?; // signature algorithm
    let issuer = tbs.expect_next(SEQUENCE)?;
    let mut validity = Der(tbs.expect_next(SEQUENCE)?);
    let not_before = time(validity.next()?)?;
    let not_after = time(validity.next()?)?;
    let subject = tbs.expect_next(SEQUENCE)?;
    let mut facts = CertFacts {
        version,
        not_before,
        not_after,
        is_ca: false,
        server_auth: true,
        name_constrained: false,
        self_issued: issuer == subject,
        subject_cn: common_name(subject),
        issuer_cn: common_name(issuer),
    };
    while let Some((tag, value)) = tbs.next() {
        if tag == EXTENSIONS_TAG {
            read_extensions(Der(value).expect(SEQUENCE)?, &mut facts)?;
        }
    }
    Some(facts)
}

/// basicConstraints, extendedKeyUsage and whether nameConstraints is there.
fn read_extensions(list: &[u8], facts: &mut CertFacts) -> Option<()> {
    let mut list = Der(list);
    while let Some((_, ext)) = list.next() {
        let mut ext = Der(ext);
        let id = ext.expect_next(OID)?;
        if ext.peek() == Some(BOOLEAN) {
            ext.next()?; // critical
        }
        let value = Der(ext.expect_next(OCTET_STRING)?);
        facts.name_constrained |= id == NAME_CONSTRAINTS;
        if id == BASIC_CONSTRAINTS {
            let mut bc = Der(value.expect(SEQUENCE)?);
            facts.is_ca = bc.peek() == Some(BOOLEAN) && bc.next()?.1 != [0];
        } else if id == EXT_KEY_USAGE {
            let mut purposes = Der(value.expect(SEQUENCE)?);
            facts.server_auth = false;
            while let Some((_, purpose)) = purposes.next() {
                facts.server_auth |= purpose == SERVER_AUTH;
            }
        }
    }
    Some(())
}

/// The first commonName of a Name, when it is a text string.
fn common_name(name: &[u8]) -> Option<String> {
    let mut rdns = Der(name);
    while let Some((_, set)) = rdns.next() {
        let mut attributes = Der(set);
        while let Some((_, attribute)) = attributes.next() {
            let mut attribute = Der(attribute);
            if attribute.expect_next(OID)? == COMMON_NAME {
                let (_, text) = attribute.next()?;
                return Some(String::from_utf8_lossy(text).into_owned());
            }
        }
    }
    None
}

/// A UTCTime (`YYMMDDHHMMSSZ`, years 50–99 are 19xx) or GeneralizedTime
/// (`YYYYMMDDHHMMSSZ`), in Unix seconds.
fn time((tag, value): (u8, &[u8])) -> Option<i64> {
    let text = std::str::from_utf8(value).ok()?.strip_suffix('Z')?;
    let (year, rest) = match (tag, text.len()) {
        (UTC_TIME, 12) => {
            let yy: i32 = text[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        (GENERALIZED_TIME, 14) => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let field = |i: usize| rest.get(i..i + 2)?.parse::<u32>().ok();
    let at = chrono::NaiveDate::from_ymd_opt(year, field(0)?, field(2)?)?.and_hms_opt(
        field(4)?,
        field(6)?,
        field(8)?,
    )?;
    Some(at.and_utc().timestamp())
}

/// A DER reader over the contents of one constructed value.
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// The next value's tag and contents. Single-byte tags and definite
    /// lengths of up to four bytes: all a certificate uses.
    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        let (&tag, rest) = self.0.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (usize::from(first), rest)
        } else {
            let n = usize::from(first & 0x7F);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n]
                .iter()
                .fold(0usize, |acc, &b| (acc << 8) | usize::from(b));
            (len, &rest[n..])
        };
        if rest.len() < len {
            return None;
        }
        self.0 = &rest[len..];
        Some((tag, &rest[..len]))
    }

    /// The next value's contents when it has `tag`.
    fn expect_next(&mut self, tag: u8) -> Option<&'a [u8]> {
        self.next().filter(|(t, _)| *t == tag).map(|(_, v)| v)
    }

    /// The contents of the one value this holds, when it has `tag`.
    fn expect(mut self, tag: u8) -> Option<&'a [u8]> {
        self.expect_next(tag)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    };

    fn der(params: CertificateParams) -> Vec<u8> {
        let key = KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn params() -> CertificateParams {
        let mut p = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, "localhost");
        p
    }

    #[test]
    fn a_ca_self_signed_certificate_reads_as_such() {
        let mut p = params();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.not_before = rcgen::date_time_ymd(2024, 2, 29);
        p.not_after = rcgen::date_time_ymd(2051, 1, 2);
        let f = facts(&der(p)).unwrap();
        assert_eq!(f.version, 3);
        assert!(f.is_ca && f.self_issued && f.server_auth);
        assert_eq!(f.subject_cn.as_deref(), Some("localhost"));
        assert_eq!(f.issuer_cn.as_deref(), Some("localhost"));
        // 2024-02-29 and 2051-01-02, midnight UTC (rcgen writes the year
        // 2051 as GeneralizedTime).
        assert_eq!(f.not_before, 1_709_164_800);
        assert_eq!(f.not_after, 2_556_230_400);
    }

    #[test]
    fn a_leaf_without_server_auth_is_not_for_tls_servers() {
        let mut p = params();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let f = facts(&der(p)).unwrap();
        assert!(!f.is_ca && !f.server_auth);
        let mut p = params();
        p.is_ca = IsCa::ExplicitNoCa;
        p.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ClientAuth,
            ExtendedKeyUsagePurpose::ServerAuth,
        ];
        let f = facts(&der(p)).unwrap();
        assert!(!f.is_ca && f.server_auth);
    }

    #[test]
    fn utc_time_years_split_at_1950() {
        assert_eq!(time((UTC_TIME, b"491231235959Z")), Some(2_524_607_999));
        assert_eq!(time((UTC_TIME, b"700101000000Z")), Some(0));
        assert_eq!(time((GENERALIZED_TIME, b"19700101000001Z")), Some(1));
        assert_eq!(time((UTC_TIME, b"701301000000Z")), None, "month 13");
        assert_eq!(time((UTC_TIME, b"7001010000Z")), None, "too short");
    }

    #[test]
    fn truncated_or_garbage_input_reads_as_nothing() {
        let good = der(params());
        assert!(facts(&good).is_some());
        for cut in [0, 1, 10, good.len() / 2, good.len() - 1] {
            assert_eq!(facts(&good[..cut]), None, "cut at {cut}");
        }
        assert_eq!(facts(b"-----BEGIN CERTIFICATE-----"), None);
    }
}
