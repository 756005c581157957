//! Client-side topic-name validation (DESIGN §3.11).
//!
//! The server turns topic names into directory names without checking them (`../x` escapes its
//! log directory), so the client refuses bad names before any request is built.

use crate::error::InvalidTopicName;

/// The longest topic name accepted (as Kafka).
pub(crate) const MAX_TOPIC_NAME_LEN: usize = 249;

/// Checks a topic name: 1–249 characters of `[A-Za-z0-9._-]`, and not `.` or `..`.
///
/// ```
/// use stellflow_sansio::validate_topic_name;
/// assert!(validate_topic_name("orders.v1-eu_2").is_ok());
/// assert!(validate_topic_name("../etc").is_err());
/// assert!(validate_topic_name("..").is_err());
/// ```
pub fn validate_topic_name(name: &str) -> Result<(), InvalidTopicName> {
    if name.is_empty() {
        return Err(InvalidTopicName::Empty);
    }
    if name.len() > MAX_TOPIC_NAME_LEN {
        return Err(InvalidTopicName::TooLong {
            len: name.len(),
            max: MAX_TOPIC_NAME_LEN,
        });
    }
    if name == "." || name == ".." {
        return Err(InvalidTopicName::Reserved {
            name: name.to_owned(),
        });
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(InvalidTopicName::IllegalCharacter {
            name: name.to_owned(),
            character: c,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_legal_names() {
        for n in ["a", "A.b_c-9", "...", "a..b", &"x".repeat(249)] {
            assert!(validate_topic_name(n).is_ok(), "{n}");
        }
    }

    #[test]
    fn rejects_illegal_names() {
        assert_eq!(validate_topic_name(""), Err(InvalidTopicName::Empty));
        assert!(matches!(
            validate_topic_name(&"x".repeat(250)),
            Err(InvalidTopicName::TooLong { len: 250, .. })
        ));
        assert!(matches!(
            validate_topic_name("."),
            Err(InvalidTopicName::Reserved { .. })
        ));
        assert!(matches!(
            validate_topic_name(".."),
            Err(InvalidTopicName::Reserved { .. })
        ));
        for (n, c) in [
            ("../x", '/'),
            ("a b", ' '),
            ("é", 'é'),
            ("a\0", '\0'),
            ("a\\b", '\\'),
        ] {
            assert_eq!(
                validate_topic_name(n),
                Err(InvalidTopicName::IllegalCharacter {
                    name: n.to_owned(),
                    character: c
                })
            );
        }
    }
}
