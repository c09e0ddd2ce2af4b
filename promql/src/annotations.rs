//! Warnings and infos attached to a query result (Prometheus' `util/annotations`).
//!
//! An annotation is about a sub-expression; its text ends with that sub-expression's
//! `(line:column)` in the query. Annotations with the same message are reported once, like
//! Prometheus, which keys them by message.

use std::collections::BTreeMap;

use crate::parser::line_col;

/// Severity of an annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Level {
    /// Something is likely wrong with the query or data (`PromQL warning`).
    Warning,
    /// Something the user may want to know (`PromQL info`).
    Info,
}

/// One annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Annotation {
    /// Severity.
    pub level: Level,
    /// Message without the level prefix or position.
    pub message: String,
    /// Byte offset of the sub-expression the annotation is about.
    pub pos: usize,
}

impl Annotation {
    /// The text Prometheus returns: `PromQL warning: <message> (<line>:<column>)`.
    pub fn render(&self, query: &str) -> String {
        let prefix = match self.level {
            Level::Warning => "PromQL warning",
            Level::Info => "PromQL info",
        };
        let (line, col) = line_col(query, self.pos);
        format!("{prefix}: {} ({line}:{col})", self.message)
    }
}

/// A de-duplicated collection of annotations.
#[derive(Debug, Default, Clone)]
pub struct Annotations {
    by_message: BTreeMap<(Level, String), usize>,
}

impl Annotations {
    /// Adds a warning about the expression starting at `pos`.
    pub fn warn(&mut self, message: impl Into<String>, pos: usize) {
        self.by_message.insert((Level::Warning, message.into()), pos);
    }

    /// Adds an info about the expression starting at `pos`.
    pub fn info(&mut self, message: impl Into<String>, pos: usize) {
        self.by_message.insert((Level::Info, message.into()), pos);
    }

    /// Adds all annotations of `other`.
    pub fn merge(&mut self, other: Annotations) {
        self.by_message.extend(other.by_message);
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.by_message.is_empty()
    }

    /// All annotations, warnings first.
    pub fn to_vec(&self) -> Vec<Annotation> {
        self.by_message
            .iter()
            .map(|((level, message), pos)| Annotation { level: *level, message: message.clone(), pos: *pos })
            .collect()
    }
}
