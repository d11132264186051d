//! [`SceneError`]: a scene problem with file, line and column.

use std::fmt;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::locate;
use crate::error::ValidationError;

/// What kind of scene problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SceneErrorKind {
    /// The file could not be read.
    Io,
    /// Not valid TOML, or a field has the wrong name or type.
    Syntax,
    /// Well-formed but inconsistent (unknown material, negative radius, ...).
    Invalid,
    /// A particle file the scene names is missing or malformed.
    ParticleFile,
}

/// A scene problem. Displays as `path:line:column: message` when the place is known.
#[derive(Debug, Clone, Error)]
pub struct SceneError {
    /// The file with the problem (the scene, or a particle file it names).
    pub path: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// 1-based column, when known.
    pub column: Option<usize>,
    /// Which stage failed.
    pub kind: SceneErrorKind,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for SceneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(col) = self.column {
                write!(f, ":{col}")?;
            }
        }
        write!(f, ": {}", self.message)
    }
}

impl SceneError {
    pub(crate) fn read(path: &Path, e: impl fmt::Display) -> Self {
        Self {
            path: path.to_path_buf(),
            line: None,
            column: None,
            kind: SceneErrorKind::Io,
            message: e.to_string(),
        }
    }

    pub(crate) fn syntax(path: &Path, text: &str, e: &toml::de::Error) -> Self {
        let (line, column) = match e.span() {
            Some(span) => {
                let (l, c) = locate::line_col(text, span.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        Self {
            path: path.to_path_buf(),
            line,
            column,
            kind: SceneErrorKind::Syntax,
            message: e.message().trim().replace('\n', " "),
        }
    }

    pub(crate) fn invalid(path: &Path, text: &str, e: ValidationError) -> Self {
        let place = locate::field(text, &e.field);
        Self {
            path: path.to_path_buf(),
            line: place.map(|p| p.0),
            column: place.map(|p| p.1),
            kind: SceneErrorKind::Invalid,
            message: e.to_string(),
        }
    }

    pub(crate) fn particle_file(
        path: &Path,
        line: Option<usize>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            path: path.to_path_buf(),
            line,
            column: None,
            kind: SceneErrorKind::ParticleFile,
            message: message.into(),
        }
    }
}
