//! Broker addresses ([`BrokerAddress`]) and bootstrap-list parsing: plain data, below every
//! module that names a broker.

use crate::config_error::ConfigError;
use std::fmt;

/// A broker endpoint as the client dials it: `host:port`.
///
/// The `stellflow://host:port` form of the server's configuration is accepted on input and
/// normalised away (nothing textual is ever sent on the socket).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerAddress {
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl BrokerAddress {
    /// An address from its parts.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        BrokerAddress {
            host: host.into(),
            port,
        }
    }

    /// Parses one `host:port`, `stellflow://host:port` or `[v6]:port` address.
    ///
    /// ```
    /// # use stellflow_sansio::BrokerAddress;
    /// let a = BrokerAddress::parse("stellflow://broker-1:9092").unwrap();
    /// assert_eq!(a, BrokerAddress::new("broker-1", 9092));
    /// assert_eq!(a.to_string(), "broker-1:9092");
    /// ```
    pub fn parse(input: &str) -> Result<Self, ConfigError> {
        let bad = |why: &'static str| ConfigError::InvalidAddress {
            address: input.to_owned(),
            reason: why,
        };
        let s = input.trim();
        let s = match s.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("stellflow") => rest,
            Some(_) => return Err(bad("the only accepted scheme is stellflow://")),
            None => s,
        };
        let s = s.strip_suffix('/').unwrap_or(s);
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (host, after) = rest
                .split_once(']')
                .ok_or_else(|| bad("unclosed [ in IPv6 address"))?;
            let port = after
                .strip_prefix(':')
                .ok_or_else(|| bad("missing :port"))?;
            (host, port)
        } else {
            s.rsplit_once(':').ok_or_else(|| bad("missing :port"))?
        };
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        if host.contains(['/', ' ', ',']) {
            return Err(bad("host contains an illegal character"));
        }
        let port: u16 = port
            .parse()
            .map_err(|_| bad("port is not a number 1-65535"))?;
        if port == 0 {
            return Err(bad("port 0 cannot be dialled"));
        }
        Ok(BrokerAddress::new(host, port))
    }
}

impl fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Parses a comma-separated bootstrap list (`"a:9092, stellflow://b:9092"`), dropping duplicates
/// and keeping the given order. An empty entry (`"a:1,,b:2"`, a trailing comma) is refused:
/// it is usually an address lost in a template.
///
/// ```
/// use stellflow_sansio::parse_bootstrap;
/// let list = parse_bootstrap("a:1,stellflow://b:2, a:1").unwrap();
/// assert_eq!(list.len(), 2);
/// ```
pub fn parse_bootstrap(list: &str) -> Result<Vec<BrokerAddress>, ConfigError> {
    let mut out: Vec<BrokerAddress> = Vec::new();
    if list.trim().is_empty() {
        return Err(ConfigError::EmptyBootstrap);
    }
    for part in list.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(ConfigError::InvalidAddress {
                address: list.to_owned(),
                reason: "the bootstrap list has an empty entry (two commas in a row, or one at an end)",
            });
        }
        let addr = BrokerAddress::parse(part)?;
        if !out.contains(&addr) {
            out.push(addr);
        }
    }
    if out.is_empty() {
        return Err(ConfigError::EmptyBootstrap);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_accepted_form() {
        assert_eq!(
            BrokerAddress::parse("h:1").unwrap(),
            BrokerAddress::new("h", 1)
        );
        assert_eq!(
            BrokerAddress::parse(" stellflow://10.0.0.1:9092/ ").unwrap(),
            BrokerAddress::new("10.0.0.1", 9092)
        );
        assert_eq!(
            BrokerAddress::parse("STELLFLOW://h:2").unwrap(),
            BrokerAddress::new("h", 2)
        );
        let v6 = BrokerAddress::parse("[::1]:9092").unwrap();
        assert_eq!(v6, BrokerAddress::new("::1", 9092));
        assert_eq!(v6.to_string(), "[::1]:9092");
    }

    #[test]
    fn rejects_bad_addresses() {
        for bad in [
            "h",
            "h:",
            ":1",
            "h:0",
            "h:65536",
            "h:x",
            "http://h:1",
            "[::1",
            "[::1]9",
            "a b:1",
        ] {
            assert!(BrokerAddress::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bootstrap_lists() {
        let l = parse_bootstrap("a:1, stellflow://b:2 ,a:1").unwrap();
        assert_eq!(
            l,
            vec![BrokerAddress::new("a", 1), BrokerAddress::new("b", 2)]
        );
        assert_eq!(parse_bootstrap("  "), Err(ConfigError::EmptyBootstrap));
        for empty in ["a:1,,b:2", "a:1,", ",a:1", " , "] {
            let e = parse_bootstrap(empty).unwrap_err();
            assert!(e.to_string().contains("empty entry"), "{empty}: {e}");
        }
        assert!(parse_bootstrap("a:1,b").is_err());
    }
}
