//! The strata server binary.
fn main() {}
