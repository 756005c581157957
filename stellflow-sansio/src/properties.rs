//! Java `.properties` text (what the Java client's `Properties.load` reads) as Kafka-style
//! `key = value` pairs, and [`ClientConfig`] built from such a text or file.
//!
//! The parser is pure: it takes the text. [`ClientConfig::from_properties_file`] is the one
//! place of this crate that reads a file; it only reads the file the application names, when
//! the application calls it, and hands the text over. The client state machine never does IO.

use crate::config::ClientConfig;
use crate::config_error::ConfigError;
use std::path::Path;

/// Parses the text of a Java `.properties` file into `(key, value)` pairs, in file order (a
/// key given twice appears twice; the last one wins when the pairs are applied in order). The
/// format is `java.util.Properties.load`'s, described on [`ClientConfig::from_properties`]. The
/// only error is a malformed `\uXXXX` escape, named with its line.
///
/// ```
/// # use stellflow_sansio::parse_properties;
/// let pairs = parse_properties(
///     "# producer settings\n\
///      bootstrap.servers = a:9092,\\\n    b:9092\n\
///      linger.ms: 20\n\
///      ! comment\n\
///      client.id billing\\u002d1\n",
/// )
/// .unwrap();
/// let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
/// assert_eq!(
///     pairs,
///     [
///         ("bootstrap.servers", "a:9092,b:9092"),
///         ("linger.ms", "20"),
///         ("client.id", "billing-1"),
///     ]
/// );
/// ```
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, ConfigError> {
    let mut pairs = Vec::new();
    let mut lines = NaturalLines::new(text);
    while let Some((number, first)) = lines.next() {
        let first = first.trim_start_matches(is_blank);
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        // Join the continuation lines into one logical line.
        let mut logical = String::from(first);
        while ends_in_escape(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        pairs.push(split_entry(&logical, number)?);
    }
    Ok(pairs)
}

impl ClientConfig {
    /// A configuration from the text of a Java `.properties` file: every entry is a
    /// Kafka-style key, applied in file order through [`ClientConfig::from_kafka_properties`],
    /// so `bootstrap.servers` is required and the result is validated. An unknown key fails
    /// naming it (and the key it was probably meant to be), a Kafka key without an equivalent
    /// here says what to use instead.
    ///
    /// The format is `java.util.Properties.load`'s:
    /// - one entry a line: `key=value`, `key: value` or `key value`; whitespace around the
    ///   separator is dropped, and so is leading whitespace of the line;
    /// - lines whose first non-blank character is `#` or `!` are comments, blank lines are
    ///   skipped;
    /// - a line ending in an odd number of backslashes continues on the next line (whose
    ///   leading whitespace is dropped);
    /// - escapes: `\t`, `\n`, `\r`, `\f`, `\uXXXX`, and a backslash before any other
    ///   character stands for that character (`\=`, `\:`, `\ `, `\#`, `\\`), in keys and
    ///   values alike. A malformed `\uXXXX` escape fails with
    ///   [`ConfigError::PropertiesSyntax`] naming its line.
    ///
    /// ```
    /// # use stellflow_sansio::{Acks, ClientConfig};
    /// let config = ClientConfig::from_properties(
    ///     "bootstrap.servers=127.0.0.1:9092\nacks=1\ngroup.id=billing\n",
    /// )
    /// .unwrap();
    /// assert_eq!(config.producer.acks, Acks::Leader);
    /// let e = ClientConfig::from_properties("bootstrap.servers=a:1\nlingr.ms=5\n").unwrap_err();
    /// assert!(e.to_string().contains("did you mean \"linger.ms\"?"), "{e}");
    /// ```
    pub fn from_properties(text: &str) -> Result<ClientConfig, ConfigError> {
        ClientConfig::from_kafka_properties(parse_properties(text)?)
    }

    /// A configuration from a Java `.properties` file, as [`ClientConfig::from_properties`]
    /// reads its text. The file is read as UTF-8; a file that is not UTF-8 is read as
    /// ISO-8859-1, as `Properties.load(InputStream)` reads every file. A file that cannot be
    /// read fails with [`ConfigError::ReadFile`] naming it.
    ///
    /// This only reads the file and hands its text over: call it from your application
    /// (in an async task it blocks for the read, as `std::fs` does).
    pub fn from_properties_file(path: impl AsRef<Path>) -> Result<ClientConfig, ConfigError> {
        ClientConfig::from_properties(&read_properties_file(path.as_ref())?)
    }
}

/// The text of a properties file: UTF-8, or ISO-8859-1 when it is not UTF-8.
///
/// ```
/// # use stellflow_sansio::{ConfigError, read_properties_file};
/// let e = read_properties_file("no/such/client.properties".as_ref()).unwrap_err();
/// assert!(matches!(e, ConfigError::ReadFile { .. }));
/// assert!(e.to_string().contains("no/such/client.properties"), "{e}");
/// ```
pub fn read_properties_file(path: &Path) -> Result<String, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| ConfigError::ReadFile {
        path: path.display().to_string(),
        reason: e.to_string(),
    })?;
    Ok(String::from_utf8(bytes).unwrap_or_else(|not_utf8| {
        not_utf8
            .into_bytes()
            .iter()
            .map(|&b| char::from(b))
            .collect()
    }))
}

/// Whitespace as `Properties` counts it: space, tab, form feed.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\x0c')
}

/// Whether the line ends in an odd number of backslashes (a line continuation).
fn ends_in_escape(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// One logical line as its key and value.
fn split_entry(line: &str, number: usize) -> Result<(String, String), ConfigError> {
    // The key ends at the first unescaped `=`, `:` or blank.
    let mut key_end = line.len();
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || is_blank(c) {
            key_end = i;
            break;
        }
    }
    let (raw_key, rest) = line.split_at(key_end);
    // Blanks, then at most one `=` or `:`, then blanks.
    let rest = rest.trim_start_matches(is_blank);
    let rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
    let raw_value = rest.trim_start_matches(is_blank);
    Ok((unescape(raw_key, number)?, unescape(raw_value, number)?))
}

/// The text with its escapes replaced.
fn unescape(raw: &str, number: usize) -> Result<String, ConfigError> {
    if !raw.contains('\\') {
        return Ok(raw.to_owned());
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => out.push(unicode_escape(&mut chars, number)?),
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

/// The character of a `\uXXXX` escape (a surrogate pair of two escapes makes one character).
fn unicode_escape(chars: &mut std::str::Chars<'_>, number: usize) -> Result<char, ConfigError> {
    let malformed = || malformed_escape(number);
    let high = hex_unit(chars, number)?;
    if !(0xD800..0xDC00).contains(&high) {
        return char::from_u32(high).ok_or_else(malformed);
    }
    // A high surrogate takes the low one of the next escape.
    let low = match (chars.next(), chars.next()) {
        (Some('\\'), Some('u')) => hex_unit(chars, number)?,
        _ => return Err(malformed()),
    };
    if !(0xDC00..0xE000).contains(&low) {
        return Err(malformed());
    }
    char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)).ok_or_else(malformed)
}

/// The four hexadecimal digits after `\u`.
fn hex_unit(chars: &mut std::str::Chars<'_>, number: usize) -> Result<u32, ConfigError> {
    let digits: String = chars.by_ref().take(4).collect();
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(malformed_escape(number));
    }
    u32::from_str_radix(&digits, 16).map_err(|_| malformed_escape(number))
}

/// The error of a malformed `\uXXXX` escape on line `number`.
fn malformed_escape(number: usize) -> ConfigError {
    ConfigError::PropertiesSyntax {
        line: number,
        reason: "malformed \\uXXXX escape: \\u takes four hexadecimal digits",
    }
}

/// The natural lines of a text (ended by `\n`, `\r` or `\r\n`), numbered from 1.
struct NaturalLines<'a> {
    rest: &'a str,
    number: usize,
}

impl<'a> NaturalLines<'a> {
    fn new(text: &'a str) -> Self {
        NaturalLines {
            // A byte-order mark is not part of the first key.
            rest: text.strip_prefix('\u{feff}').unwrap_or(text),
            number: 0,
        }
    }
}

impl<'a> Iterator for NaturalLines<'a> {
    type Item = (usize, &'a str);

    fn next(&mut self) -> Option<(usize, &'a str)> {
        if self.rest.is_empty() {
            return None;
        }
        self.number += 1;
        let end = self.rest.find(['\n', '\r']).unwrap_or(self.rest.len());
        let line = &self.rest[..end];
        let after = &self.rest[end..];
        self.rest = after
            .strip_prefix("\r\n")
            .or_else(|| after.strip_prefix(['\n', '\r']))
            .unwrap_or(after);
        Some((self.number, line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse_properties(text).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn one(text: &str) -> (String, String) {
        let mut all = pairs(text);
        assert_eq!(all.len(), 1, "{text:?}: {all:?}");
        all.remove(0)
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_owned(), v.to_owned())
    }

    #[test]
    fn separators() {
        for text in [
            "linger.ms=20",
            "linger.ms = 20",
            "linger.ms:20",
            "  linger.ms :  20",
            "linger.ms 20",
            "linger.ms\t=\t20",
            "\x0clinger.ms 20",
        ] {
            assert_eq!(one(text), kv("linger.ms", "20"), "{text:?}");
        }
        // Only one separator is dropped; the value keeps the rest.
        assert_eq!(one("a==b"), kv("a", "=b"));
        assert_eq!(one("a = :b"), kv("a", ":b"));
        assert_eq!(one("url=stellflow://h:1"), kv("url", "stellflow://h:1"));
        // A key alone has an empty value; trailing blanks of the value are kept (as Java does).
        assert_eq!(one("group.id"), kv("group.id", ""));
        assert_eq!(one("group.id ="), kv("group.id", ""));
        assert_eq!(one("a = b  "), kv("a", "b  "));
    }

    #[test]
    fn comments_blank_lines_and_line_ends() {
        let text = "# a comment\n! another\n\n   \n  # indented comment\na=1\r\nb=2\rc=3\n#d=4";
        assert_eq!(pairs(text), [kv("a", "1"), kv("b", "2"), kv("c", "3")]);
        // `#` inside a value is text, not a comment.
        assert_eq!(one("a=b # c"), kv("a", "b # c"));
        // A byte-order mark does not become part of the first key.
        assert_eq!(one("\u{feff}a=1"), kv("a", "1"));
    }

    #[test]
    fn continuations() {
        assert_eq!(
            one("bootstrap.servers = a:1,\\\n    b:2,\\\r\n\tc:3"),
            kv("bootstrap.servers", "a:1,b:2,c:3")
        );
        // An even number of backslashes is an escaped backslash, not a continuation.
        assert_eq!(pairs("a=x\\\\\nb=y"), [kv("a", "x\\"), kv("b", "y")]);
        // A continuation at the end of the text ends the entry.
        assert_eq!(one("a=x\\"), kv("a", "x"));
        // A comment line does not continue.
        assert_eq!(one("# c \\\na=1"), kv("a", "1"));
        // A continued key.
        assert_eq!(one("lin\\\n  ger.ms=5"), kv("linger.ms", "5"));
    }

    #[test]
    fn escapes() {
        assert_eq!(one("a\\=b=c"), kv("a=b", "c"));
        assert_eq!(one("a\\:b:c"), kv("a:b", "c"));
        assert_eq!(one("a\\ b c"), kv("a b", "c"));
        assert_eq!(one("\\#a=1"), kv("#a", "1"));
        assert_eq!(one("a=\\t\\n\\r\\f\\\\\\q"), kv("a", "\t\n\r\x0c\\q"));
        assert_eq!(one("a=\\u0041\\u00e9"), kv("a", "Aé"));
        assert_eq!(one("a=\\uD83D\\uDE00"), kv("a", "\u{1F600}"));
        // Non-ASCII text as it is.
        assert_eq!(one("a=grüße"), kv("a", "grüße"));
    }

    #[test]
    fn malformed_unicode_escapes_name_their_line() {
        for bad in [
            "a=\\u12",
            "a=\\u12G4",
            "a=\\uD83D",
            "a=\\uD83Dx",
            "a=\\uD83D\\u0041",
        ] {
            let e = parse_properties(&format!("# one\nb=2\n{bad}\n")).unwrap_err();
            assert_eq!(
                e,
                ConfigError::PropertiesSyntax {
                    line: 3,
                    reason: "malformed \\uXXXX escape: \\u takes four hexadecimal digits",
                },
                "{bad:?}"
            );
            assert!(e.to_string().contains("line 3"), "{e}");
        }
    }

    #[test]
    fn a_file_of_the_java_client_builds_a_configuration() {
        let text = "\
# Kafka client settings
bootstrap.servers=127.0.0.1:9092,\\
                  127.0.0.1:9093
group.id : billing
enable.auto.commit = false
auto.offset.reset earliest
linger.ms=20
linger.ms=25
";
        let c = ClientConfig::from_properties(text).unwrap();
        assert_eq!(c.bootstrap.len(), 2);
        assert_eq!(c.consumer.group_id.as_deref(), Some("billing"));
        assert!(!c.consumer.enable_auto_commit);
        assert_eq!(c.producer.linger, std::time::Duration::from_millis(25));
        assert_eq!(
            ClientConfig::from_properties("acks=1").unwrap_err(),
            ConfigError::EmptyBootstrap
        );
    }

    #[test]
    fn files_are_read_as_utf8_or_latin1() {
        let dir = std::env::temp_dir().join(format!("stellflow-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let utf8 = dir.join("utf8.properties");
        std::fs::write(&utf8, "bootstrap.servers=a:1\nclient.id=grüße\n").unwrap();
        let c = ClientConfig::from_properties_file(&utf8).unwrap();
        assert_eq!(c.header.client_id.as_deref(), Some("grüße"));
        let latin1 = dir.join("latin1.properties");
        std::fs::write(&latin1, b"bootstrap.servers=a:1\nclient.id=gr\xfc\xdfe\n").unwrap();
        let c = ClientConfig::from_properties_file(&latin1).unwrap();
        assert_eq!(c.header.client_id.as_deref(), Some("grüße"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
