//! Build errors. Input errors carry file, position, value and bound in their
//! message; the CLI prints them verbatim.

use flashgnn_format::FormatError;
use flashgnn_io::IoError;

pub type Result<T, E = BuildError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Bad input data: `{file}: {position}: {message}`.
    #[error("{file}: {position}: {message}")]
    Input { file: String, position: String, message: String },
    /// A missing file, wrong layout or bad option combination.
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error(transparent)]
    Io(#[from] IoError),
    #[error(transparent)]
    Store(#[from] flashgnn_store::StoreError),
    #[error("build cancelled; nothing was published")]
    Cancelled,
}

impl BuildError {
    pub fn input(file: impl std::fmt::Display, position: impl Into<String>, message: impl Into<String>) -> Self {
        BuildError::Input { file: file.to_string(), position: position.into(), message: message.into() }
    }
    pub fn config(message: impl Into<String>) -> Self {
        BuildError::Config(message.into())
    }
}
