//! Errors a simulated provider answers with, rendered in each flavour's real JSON shape.

use serde_json::Value;

pub use crate::api_error::{ApiError, dim_words};
use crate::config::Flavor;

impl ApiError {
    /// The JSON body in `flavor`'s shape.
    #[must_use]
    pub fn body(&self, flavor: Flavor, request_id: &str) -> Value {
        match flavor {
            // Bedrock's answers are built in Anthropic's shape, then turned into Bedrock's.
            Flavor::Anthropic | Flavor::Bedrock => crate::anthropic::errors::body(self, request_id),
            Flavor::Azure if self.status() == 429 => crate::openai::errors::azure_429(self),
            Flavor::Azure if self.status() == 401 => crate::openai::errors::azure_401(),
            Flavor::Gemini if self.status() == 429 => crate::openai::errors::gemini_429(self),
            _ => crate::openai::errors::body(self),
        }
    }
}
