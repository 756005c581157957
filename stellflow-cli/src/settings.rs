//! The Kafka-style client settings of the command line: a `--config` properties file, then the
//! `-X key=value` flags, and the bootstrap list they and `--bootstrap` choose.

use crate::{CliError, CliResult, Global};
use stellflow_blocking::ClientConfig;

/// The settings of one run, in the order they apply.
pub(crate) struct Settings {
    /// The file's name, for its errors, and its entries.
    file: Option<(String, Vec<(String, String)>)>,
    /// The `-X` flags as `(key, value)`.
    flags: Vec<(String, String)>,
}

/// The key that names the brokers; chosen once, before the client is built.
const BOOTSTRAP: &str = "bootstrap.servers";

impl Global {
    /// Reads the `--config` file and splits the `-X` flags.
    pub(crate) fn properties(&self) -> CliResult<Settings> {
        let file = match &self.config_file {
            Some(path) => {
                let text = stellflow_sansio::read_properties_file(path)?;
                let name = path.display().to_string();
                let entries = stellflow_sansio::parse_properties(&text)
                    .map_err(|e| CliError(format!("{name}: {e}")))?;
                Some((name, entries))
            }
            None => None,
        };
        let mut flags = Vec::with_capacity(self.property.len());
        for property in &self.property {
            let (key, value) = property.split_once('=').ok_or_else(|| {
                CliError(format!(
                    "-X {property}: expected KEY=VALUE, e.g. -X linger.ms=20"
                ))
            })?;
            flags.push((key.trim().to_owned(), value.to_owned()));
        }
        Ok(Settings { file, flags })
    }
}

impl Settings {
    /// The bootstrap list: `-X bootstrap.servers`, else `--bootstrap`, else the file's
    /// `bootstrap.servers`; `None` runs the embedded broker.
    pub(crate) fn bootstrap<'a>(&'a self, flag: Option<&'a str>) -> Option<&'a str> {
        let last = |pairs: &'a [(String, String)]| {
            pairs
                .iter()
                .rfind(|(k, _)| k == BOOTSTRAP)
                .map(|(_, v)| v.as_str())
        };
        let file = self.file.as_ref().and_then(|(_, entries)| last(entries));
        last(&self.flags).or(flag).or(file)
    }

    /// Sets every key but the bootstrap list (chosen by [`Settings::bootstrap`]): the file's
    /// first, then the flags. An error names the file when a key of the file is wrong.
    pub(crate) fn apply(&self, config: &mut ClientConfig) -> CliResult {
        if let Some((name, entries)) = &self.file {
            for (key, value) in entries.iter().filter(|(k, _)| k != BOOTSTRAP) {
                config
                    .set(key, value)
                    .map_err(|e| CliError(format!("{name}: {e}")))?;
            }
        }
        for (key, value) in self.flags.iter().filter(|(k, _)| k != BOOTSTRAP) {
            config.set(key, value)?;
        }
        Ok(())
    }
}
