//! Bounds on what one request may contain.
//!
//! Every decoder checks these before doing the work they bound: the snappy header's declared
//! length before allocating, gzip through a reader that stops at the bound, label counts and
//! lengths before building a series. A violation is an [`Error::LimitExceeded`] naming the field.
//!
//! [`Error::LimitExceeded`]: crate::Error::LimitExceeded

/// Name of [`Limits::body_bytes_max`] as it appears in errors.
pub const BODY_BYTES_MAX: &str = "body_bytes_max";
/// Name of [`Limits::decoded_bytes_max`] as it appears in errors.
pub const DECODED_BYTES_MAX: &str = "decoded_bytes_max";
/// Name of [`Limits::labels_per_series_max`] as it appears in errors.
pub const LABELS_PER_SERIES_MAX: &str = "labels_per_series_max";
/// Name of [`Limits::label_name_bytes_max`] as it appears in errors.
pub const LABEL_NAME_BYTES_MAX: &str = "label_name_bytes_max";
/// Name of [`Limits::label_value_bytes_max`] as it appears in errors.
pub const LABEL_VALUE_BYTES_MAX: &str = "label_value_bytes_max";

/// Bounds on what one request may contain. Every violation is an error naming the limit.
///
/// The defaults sit well above what real senders produce (Prometheus' remote-write batches are
/// a few MiB; VictoriaMetrics accepts 32 MiB bodies), because a 4xx for a legitimate batch means
/// the sender drops it: silent data loss.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest body accepted as received, still compressed (default 32 MiB). Exceeding it is a 413.
    pub body_bytes_max: usize,
    /// Largest body after snappy/gzip decompression (default 256 MiB). Snappy's declared length
    /// is checked before allocating; gzip is read through a bounded reader. Exceeding it is a 413.
    pub decoded_bytes_max: usize,
    /// Most labels one series may have, `__name__` included (default 64).
    pub labels_per_series_max: usize,
    /// Longest label name in bytes (default 1024).
    pub label_name_bytes_max: usize,
    /// Longest label value in bytes, the metric name included (default 16 KiB).
    pub label_value_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            body_bytes_max: 32 << 20,
            decoded_bytes_max: 256 << 20,
            labels_per_series_max: 64,
            label_name_bytes_max: 1024,
            label_value_bytes_max: 16 << 10,
        }
    }
}

impl Limits {
    /// Checks the size of a body as received.
    pub fn check_body(&self, len: usize) -> crate::Result<()> {
        if len > self.body_bytes_max {
            return Err(crate::Error::limit(BODY_BYTES_MAX, len, self.body_bytes_max));
        }
        Ok(())
    }

    /// Checks the size of a body after decompression (or its declared size, before).
    pub fn check_decoded(&self, len: usize) -> crate::Result<()> {
        if len > self.decoded_bytes_max {
            return Err(crate::Error::limit(DECODED_BYTES_MAX, len, self.decoded_bytes_max));
        }
        Ok(())
    }
}
