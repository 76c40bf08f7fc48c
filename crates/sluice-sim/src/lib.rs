//! The strict simulated LLM provider (placeholder until it lands).
pub mod cli;
