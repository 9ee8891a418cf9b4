//! Reading a Postgres database URL before anything connects to it: the scheme (only
//! Postgres is served: another database gets a clear refusal, not a DNS error), the options
//! (`sslmode`, `sslrootcert`, ... as libpq reads them), the location errors may name (never
//! the password, whether it came as `user:password@` or `?password=`), and the secrets every
//! message is scrubbed of.

use std::str::FromStr;

use sqlx::postgres::{PgConnectOptions, PgSslMode};

use crate::StoreError;

/// The schemes of a Postgres URL.
pub const POSTGRES_SCHEMES: &[&str] = &["postgres", "postgresql"];

/// What to tell a user whose URL is not Postgres'.
const SUPPORTED: &str = "arbiter stores its runs and plans in SQLite (.arbiter/arbiter.db, the default: leave ARBITER_DATABASE_URL and --database-url unset) or in Postgres (postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=require])";

/// A Postgres URL, read.
pub struct PgUrl {
    pub options: PgConnectOptions,
    /// `postgres://user@host:port/database`, for messages.
    pub location: String,
    /// The URL as given, which a message may echo whole: it reads as `location` instead.
    given: String,
    secrets: Vec<String>,
}

impl PgUrl {
    pub fn parse(url: &str) -> Result<PgUrl, StoreError> {
        let secrets = url_secrets(url);
        let scrub = |text: String| scrub(&text, &secrets);
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some(s) if POSTGRES_SCHEMES.contains(&s) => {}
            Some(other) => {
                return Err(StoreError::UnsupportedDatabase {
                    problem: format!("'{other}://' is not a database arbiter can use"),
                    fix: SUPPORTED.into(),
                });
            }
            None => {
                return Err(StoreError::UnsupportedDatabase {
                    problem: "the database URL has no scheme".into(),
                    fix: SUPPORTED.into(),
                });
            }
        }
        let mut options = PgConnectOptions::from_str(url).map_err(|e| StoreError::UnsupportedDatabase {
            problem: format!("the Postgres URL cannot be read: {}", scrub(e.to_string())),
            fix: SUPPORTED.into(),
        })?;
        // libpq reads `sslmode=require` with a root certificate as `verify-ca`: the CA was
        // given to be checked against (sqlx alone would accept any certificate).
        if matches!(options.get_ssl_mode(), PgSslMode::Require) && query_has(url, "sslrootcert") {
            options = options.ssl_mode(PgSslMode::VerifyCa);
        }
        let location = format!(
            "postgres://{}@{}:{}/{}",
            options.get_username(),
            options.get_host(),
            options.get_port(),
            options.get_database().unwrap_or(options.get_username())
        );
        // Built from the parsed parts, the location never holds the password; it is not
        // scrubbed, or a password equal to the user's or the database's name would mask them.
        Ok(PgUrl { options, location, given: url.to_string(), secrets })
    }

    /// `text` with every secret of the URL masked; the location, where it appears, stays
    /// readable.
    pub fn scrub(&self, text: &str) -> String {
        let text = text.replace(self.given.as_str(), &self.location);
        text.split(self.location.as_str())
            .map(|part| scrub(part, &self.secrets))
            .collect::<Vec<_>>()
            .join(&self.location)
    }
}

/// Whether `url`'s query names `key`.
fn query_has(url: &str, key: &str) -> bool {
    url.split_once('?').is_some_and(|(_, q)| q.split('&').any(|p| p.split('=').next() == Some(key)))
}

/// The password of `url`: after `user:` in its authority, and as its `password` parameter
/// (raw and percent-decoded).
fn url_secrets(url: &str) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(after) = url.split_once("://").map(|(_, a)| a) {
        let authority = &after[..after.find(['/', '?']).unwrap_or(after.len())];
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && let Some((_, password)) = userinfo.split_once(':')
        {
            found.push(password.to_string());
        }
    }
    if let Some((_, query)) = url.split_once('?') {
        for pair in query.split('&') {
            if let Some((key, value)) = pair.split_once('=')
                && key.eq_ignore_ascii_case("password")
            {
                found.push(value.to_string());
            }
        }
    }
    let decoded: Vec<String> = found.iter().map(|s| percent_decode(s)).collect();
    found.extend(decoded);
    found.retain(|s| !s.is_empty());
    found.sort_by_key(|s| std::cmp::Reverse(s.len()));
    found.dedup();
    found
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `text` with every secret masked where it stands as a word of its own (not inside a longer
/// word: a password `db` leaves `mydb` alone, and masks `db` in `user:db@host`).
fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for secret in secrets {
        out = mask_words(&out, secret);
    }
    arbiter_core::redact::redact_patterns(&out)
}

fn mask_words(text: &str, secret: &str) -> String {
    let word_char = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(secret) {
        let before = rest[..at].chars().next_back().or_else(|| out.chars().next_back());
        let after = rest[at + secret.len()..].chars().next();
        let inside_a_word = (word_char(before) && word_char(secret.chars().next()))
            || (word_char(after) && word_char(secret.chars().next_back()));
        out.push_str(&rest[..at]);
        out.push_str(if inside_a_word { secret } else { arbiter_core::redact::MASK });
        rest = &rest[at + secret.len()..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_postgres_is_accepted_with_the_choices_named() {
        for url in ["mysql://root@db/x", "sqlite:///tmp/x.db", "db.internal:5432/x"] {
            let Err(e) = PgUrl::parse(url) else { panic!("{url} accepted") };
            let text = e.to_string();
            assert!(text.contains("SQLite") && text.contains("postgres://"), "{text}");
        }
        assert!(PgUrl::parse("postgresql://u@h/d").is_ok());
    }

    #[test]
    fn the_location_and_every_message_leave_the_password_out() {
        for url in [
            "postgres://app:s3cret-pw@db.internal:6543/prod",
            "postgres://app@db.internal:6543/prod?password=s3cret-pw",
            "postgres://app@db.internal:6543/prod?sslmode=require&password=s3cret%2Dpw",
        ] {
            let parsed = PgUrl::parse(url).unwrap();
            assert_eq!(parsed.location, "postgres://app@db.internal:6543/prod");
            let echoed = parsed.scrub(&format!("cannot connect to {url}: password s3cret-pw refused"));
            assert!(!echoed.contains("s3cret"), "{echoed}");
        }
    }

    #[test]
    fn a_short_password_equal_to_a_common_word_masks_only_itself() {
        let parsed = PgUrl::parse("postgres://postgres:postgres@127.0.0.1:5432/postgres").unwrap();
        assert_eq!(parsed.location, "postgres://postgres@127.0.0.1:5432/postgres");
        let echoed = parsed.scrub(
            "cannot connect to postgres://postgres:postgres@127.0.0.1:5432/postgres: refused, postgresql is down",
        );
        assert_eq!(
            echoed,
            "cannot connect to postgres://postgres@127.0.0.1:5432/postgres: refused, postgresql is down"
        );
        // Standing alone, the word is the password, and masked.
        assert_eq!(
            parsed.scrub("password postgres refused"),
            format!("password {} refused", arbiter_core::redact::MASK)
        );
        let db = PgUrl::parse("postgres://app:db@h/mydb").unwrap();
        assert_eq!(
            db.scrub("user app:db@h has no mydb"),
            format!("user app:{}@h has no mydb", arbiter_core::redact::MASK)
        );
    }

    #[test]
    fn sslmode_is_read_as_libpq_reads_it() {
        assert!(PgUrl::parse("postgres://u@h/d?sslmode=verify-full").is_ok());
        let mode = |url: &str| PgUrl::parse(url).unwrap().options.get_ssl_mode();
        assert!(matches!(mode("postgres://u@h/d?sslmode=require"), PgSslMode::Require));
        assert!(matches!(mode("postgres://u@h/d?sslmode=require&sslrootcert=/etc/ca.pem"), PgSslMode::VerifyCa));
        let Err(e) = PgUrl::parse("postgres://u:pw-in-url@h/d?sslmode=sometimes") else { panic!("accepted") };
        assert!(e.to_string().contains("sslmode") || e.to_string().contains("sometimes"), "{e}");
        assert!(!e.to_string().contains("pw-in-url"), "{e}");
    }
}
