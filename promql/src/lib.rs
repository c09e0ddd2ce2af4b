//! strata's PromQL engine.
