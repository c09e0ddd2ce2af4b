//! The series index.
