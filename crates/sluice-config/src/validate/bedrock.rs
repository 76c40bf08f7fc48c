//! AWS Bedrock's addressing and quota rule: the region requests are signed for, where the
//! AWS credentials come from, and the output weight (Bedrock burns each output token of
//! Claude 3.7 and later 5× against the deployment's TPM quota).

use super::*;

/// The output weight Bedrock applies to Claude 3.7 and later models.
pub const BEDROCK_CLAUDE_OUTPUT_WEIGHT: u64 = 5;
/// The largest `output_weight` accepted.
const MAX_OUTPUT_WEIGHT: u64 = 100;

impl Validator<'_> {
    /// The Bedrock fields (`region`, `aws_credentials_file`) are only for `kind = "bedrock"`,
    /// where `region` is required.
    pub(super) fn bedrock_api(&self, i: usize, p: &RawProvider) -> Result<Option<ProviderApi>> {
        let field = |f: &str| format!("providers[{i}].{f}");
        if p.kind.get_ref() != "bedrock" {
            let only = [
                ("region", &p.region),
                ("aws_credentials_file", &p.aws_credentials_file),
                ("bedrock_api", &p.bedrock_api),
            ];
            // `region` is Vertex's too; its own check refuses it elsewhere.
            let shared_with_vertex = |name: &str| name == "region" && p.kind.get_ref() == "vertex";
            if let Some((name, Some(value))) =
                only.into_iter().find(|(name, v)| v.is_some() && !shared_with_vertex(name))
            {
                let words = if name == "region" {
                    "only for kind = \"bedrock\" or kind = \"vertex\""
                } else {
                    "only for kind = \"bedrock\""
                };
                return Err(self.err(&field(name), value.span(), words));
            }
            return Ok(None);
        }
        let Some(region) = &p.region else {
            return Err(self.err(
                &field("region"),
                p.kind.span(),
                "a Bedrock provider needs region (e.g. \"us-east-1\")",
            ));
        };
        let name = region.get_ref().trim();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-') {
            return Err(self.err(&field("region"), region.span(), "an AWS region name such as \"us-east-1\""));
        }
        let surface = match p.bedrock_api.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
            None | Some(("converse", _)) => BedrockSurface::Converse,
            Some(("invoke", _)) => BedrockSurface::InvokeModel,
            Some((_, span)) => return Err(self.err(&field("bedrock_api"), span, "converse or invoke")),
        };
        Ok(Some(ProviderApi::Bedrock { region: name.to_owned(), surface }))
    }

    /// A Bedrock provider signs with AWS credentials: the `AWS_*` variables or
    /// `aws_credentials_file`, never an API key field.
    pub(super) fn aws_credentials(&self, i: usize, p: &RawProvider) -> Result<SecretSource> {
        let keys = [("api_key_env", &p.api_key_env), ("api_key_file", &p.api_key_file), ("token_file", &p.token_file)];
        if let Some((name, Some(value))) = keys.into_iter().find(|(_, v)| v.is_some()) {
            let message = "a Bedrock provider signs with AWS credentials (AWS_* variables or aws_credentials_file)";
            return Err(self.err(&format!("providers[{i}].{name}"), value.span(), message));
        }
        Ok(SecretSource::Aws { file: p.aws_credentials_file.as_ref().map(|f| f.get_ref().clone()) })
    }

    /// The deployment's output weight: explicit config wins; else Bedrock's 5 for Claude
    /// 3.7 and later, 1 for everything else.
    pub(super) fn output_weight(&self, i: usize, d: &RawDeployment, api: &ProviderApi) -> Result<u64> {
        match &d.output_weight {
            Some(w) if (1..=MAX_OUTPUT_WEIGHT).contains(w.get_ref()) => Ok(*w.get_ref()),
            Some(w) => Err(self.err(&format!("deployments[{i}].output_weight"), w.span(), "between 1 and 100")),
            None if matches!(api, ProviderApi::Bedrock { .. }) && burns_output_5x(d.model.get_ref()) => {
                Ok(BEDROCK_CLAUDE_OUTPUT_WEIGHT)
            }
            None => Ok(1),
        }
    }
}

/// Whether a Bedrock model id (or inference profile id) names Claude 3.7 or a later
/// generation (Claude Sonnet/Opus/Haiku 4 and on), whose output Bedrock burns 5×.
#[must_use]
pub fn burns_output_5x(model: &str) -> bool {
    let Some((_, claude)) = model.split_once("anthropic.claude-") else { return false };
    if claude.starts_with("3-7") {
        return true;
    }
    let mut parts = claude.split('-');
    let family = parts.next().unwrap_or_default();
    let generation = parts.next().and_then(|g| g.parse::<u32>().ok());
    matches!(family, "sonnet" | "opus" | "haiku") && generation.is_some_and(|g| g >= 4)
}

#[cfg(test)]
mod tests {
    use super::burns_output_5x;

    #[test]
    fn claude_3_7_and_later_burn_output_5x_and_older_models_do_not() {
        for model in [
            "anthropic.claude-3-7-sonnet-20250219-v1:0",
            "us.anthropic.claude-sonnet-4-20250514-v1:0",
            "anthropic.claude-opus-4-1-20250805-v1:0",
            "eu.anthropic.claude-haiku-4-5-20251001-v1:0",
        ] {
            assert!(burns_output_5x(model), "{model}");
        }
        for model in [
            "anthropic.claude-3-5-sonnet-20240620-v1:0",
            "anthropic.claude-3-haiku-20240307-v1:0",
            "meta.llama3-70b-instruct-v1:0",
            "amazon.nova-pro-v1:0",
        ] {
            assert!(!burns_output_5x(model), "{model}");
        }
    }
}
