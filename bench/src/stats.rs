//! Percentiles through hdrhistogram, and the summary the JSON records.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Samples are recorded in picoseconds so that per-operation times of a few
/// nanoseconds (batch time / batch size) keep three significant digits.
const PICOS_PER_NANO: f64 = 1_000.0;

/// A histogram of durations, recorded in picoseconds, reported in nanoseconds.
#[derive(Debug)]
pub struct Durations {
    histogram: Histogram<u64>,
}

/// Why a sample could not be recorded.
#[derive(Debug)]
pub struct RecordError(String);

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RecordError {}

impl Durations {
    /// An empty histogram (three significant digits, auto-resizing).
    pub fn new() -> Self {
        let histogram = Histogram::new(3).expect("3 significant digits is a valid precision");
        Self { histogram }
    }

    /// Records one sample of `nanos` nanoseconds (fractions kept to the picosecond).
    pub fn record_nanos(&mut self, nanos: f64) -> Result<(), RecordError> {
        if !nanos.is_finite() || nanos < 0.0 {
            return Err(RecordError(format!(
                "sample {nanos} ns is not a finite non-negative duration"
            )));
        }
        let picos = (nanos * PICOS_PER_NANO).round() as u64;
        self.histogram
            .record(picos)
            .map_err(|e| RecordError(format!("sample {nanos} ns: {e:?}")))
    }

    /// The summary recorded in the JSON.
    pub fn summary(&self) -> Percentiles {
        let h = &self.histogram;
        let ns = |picos: u64| picos as f64 / PICOS_PER_NANO;
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            min: ns(h.min()),
            mean: h.mean() / PICOS_PER_NANO,
            p50: ns(h.value_at_quantile(0.50)),
            p90: ns(h.value_at_quantile(0.90)),
            p99: ns(h.value_at_quantile(0.99)),
            p999: ns(h.value_at_quantile(0.999)),
            max: ns(h.max()),
        }
    }
}

impl Default for Durations {
    fn default() -> Self {
        Self::new()
    }
}

/// Percentiles of a set of durations, in nanoseconds (hdrhistogram, three significant
/// digits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Samples.
    pub count: u64,
    /// Smallest sample.
    pub min: f64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest sample.
    pub max: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_sequence() {
        // 1..=1000 ns: the q-quantile is q * 1000 within hdrhistogram's 3 digits.
        let mut d = Durations::new();
        for i in 1..=1000 {
            d.record_nanos(f64::from(i)).unwrap();
        }
        let s = d.summary();
        assert_eq!(s.count, 1000);
        assert_eq!(s.min, 1.0);
        assert!((s.p50 - 500.0).abs() <= 0.5, "{s:?}");
        assert!((s.p99 - 990.0).abs() <= 1.0, "{s:?}");
        assert!((s.max - 1000.0).abs() <= 1.0, "{s:?}");
        assert!((s.mean - 500.5).abs() <= 0.5, "{s:?}");
    }

    #[test]
    fn fractions_of_a_nanosecond_are_kept() {
        let mut d = Durations::new();
        d.record_nanos(3.25).unwrap();
        // Within hdrhistogram's three significant digits of 3250 ps.
        assert!((d.summary().p50 - 3.25).abs() <= 0.005, "{:?}", d.summary());
    }

    #[test]
    fn bad_samples_are_refused_by_value() {
        let mut d = Durations::new();
        let e = d.record_nanos(-1.0).unwrap_err();
        assert!(e.to_string().contains("-1"));
        assert!(d.record_nanos(f64::NAN).is_err());
        assert_eq!(d.summary().count, 0);
    }
}
