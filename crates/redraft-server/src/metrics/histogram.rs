//! Cumulative histograms (bucket counts, a sum and a count) and their samples in the text format.

/// Cumulative bucket counts, a sum and a count.
#[derive(Debug, Clone)]
pub(super) struct Histogram {
    bounds: &'static [f64],
    /// Observations at or under each bound.
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    pub(super) fn new(bounds: &'static [f64]) -> Self {
        Self { bounds, buckets: vec![0; bounds.len()], sum: 0.0, count: 0 }
    }

    pub(super) fn observe(&mut self, secs: f64) {
        for (bound, count) in self.bounds.iter().zip(self.buckets.iter_mut()) {
            if secs <= *bound {
                *count += 1;
            }
        }
        self.sum += secs;
        self.count += 1;
    }

    /// The samples of metric `name` with `labels` (already rendered, possibly empty).
    pub(super) fn samples(&self, name: &str, labels: &str) -> Vec<String> {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut out: Vec<String> = self
            .bounds
            .iter()
            .zip(&self.buckets)
            .map(|(le, n)| format!("{name}_bucket{{{labels}{sep}le=\"{le}\"}} {n}"))
            .collect();
        out.push(format!("{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", self.count));
        let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
        out.push(format!("{name}_sum{braces} {}", self.sum));
        out.push(format!("{name}_count{braces} {}", self.count));
        out
    }
}
