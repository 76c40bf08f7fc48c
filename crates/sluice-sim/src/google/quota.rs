//! Vertex AI's quotas belong to a project and a region and are shared by the models served
//! there: `[google] vertex_rpm` caps each (project, region)'s requests per minute across
//! every model, Gemini and Claude alike, before the model's own limits apply.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::limits::Bucket;

/// One simulated minute, the quota's period.
const MINUTE: f64 = 60.0;

/// The request buckets of each (project, region).
#[derive(Debug, Default)]
pub struct ProjectQuotas {
    rpm: Option<u64>,
    buckets: Mutex<HashMap<(String, String), Bucket>>,
}

impl ProjectQuotas {
    /// Quotas of `rpm` requests per minute per project and region (`None`: unlimited).
    #[must_use]
    pub fn new(rpm: Option<u64>) -> Self {
        Self { rpm, buckets: Mutex::new(HashMap::new()) }
    }

    /// Takes one request of `project` in `region` at simulated time `now`.
    ///
    /// # Errors
    /// The simulated seconds until a request would pass.
    #[expect(clippy::cast_precision_loss, reason = "quotas are far below 2^52")]
    pub fn take(&self, project: &str, region: &str, now: f64) -> Result<(), f64> {
        let Some(rpm) = self.rpm else { return Ok(()) };
        let mut buckets = self.buckets.lock();
        let key = (project.to_owned(), region.to_owned());
        let bucket = buckets.entry(key).or_insert_with(|| Bucket::full(rpm as f64, MINUTE, now));
        match bucket.wait_for(now, 1.0) {
            Some(wait) if wait <= 0.0 => {
                bucket.take(now, 1.0);
                Ok(())
            }
            Some(wait) => Err(wait),
            None => Err(MINUTE),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ProjectQuotas;

    #[test]
    fn a_project_region_quota_is_shared_and_refills() {
        let quotas = ProjectQuotas::new(Some(2));
        assert_eq!(quotas.take("p", "us-east5", 0.0), Ok(()));
        assert_eq!(quotas.take("p", "us-east5", 0.0), Ok(()));
        let wait = quotas.take("p", "us-east5", 0.0).unwrap_err();
        assert!((wait - 30.0).abs() < 1e-9, "one request back every 30 s: {wait}");
        assert_eq!(quotas.take("p", "europe-west4", 0.0), Ok(()), "another region has its own");
        assert_eq!(quotas.take("p", "us-east5", 30.0), Ok(()));
        assert_eq!(ProjectQuotas::new(None).take("p", "r", 0.0), Ok(()));
    }
}
