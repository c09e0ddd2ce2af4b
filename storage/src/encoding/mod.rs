//! Sample encodings: see the module docs once written.
