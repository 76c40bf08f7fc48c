//! Google's addressing: the Gemini API's two surfaces (OpenAI-compatible and native) and
//! Vertex AI's project, region and publisher, with the service-account key its tokens are
//! minted from.

use super::*;

impl Validator<'_> {
    /// `service_account_file`, `project`, `region` and `publisher` are Vertex's alone.
    pub(super) fn google_fields_belong(&self, i: usize, p: &RawProvider) -> Result<()> {
        if p.kind.get_ref() == "vertex" {
            return Ok(());
        }
        let vertex_only = [
            ("service_account_file", &p.service_account_file),
            ("project", &p.project),
            ("region", &p.region),
            ("publisher", &p.publisher),
        ];
        // `region` is Bedrock's too; its own check refuses it elsewhere.
        let shared_with_bedrock = |name: &str| name == "region" && p.kind.get_ref() == "bedrock";
        match vertex_only.into_iter().find(|(name, v)| v.is_some() && !shared_with_bedrock(name)) {
            Some((name, Some(value))) => {
                let words = if name == "region" {
                    "only for kind = \"bedrock\" or kind = \"vertex\""
                } else {
                    "only for kind = \"vertex\""
                };
                Err(self.err(&format!("providers[{i}].{name}"), value.span(), words))
            }
            _ => Ok(()),
        }
    }

    /// Gemini's `api_surface`: `openai` (the default: `/v1beta/openai/…`) or `native`
    /// (`/v1beta/models/{model}:generateContent`).
    pub(super) fn gemini_surface(&self, i: usize, p: &RawProvider) -> Result<ProviderApi> {
        self.gemini_base(i, p)?;
        match p.api_surface.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
            None | Some(("openai", _)) => Ok(ProviderApi::GeminiOpenAi),
            Some(("native", _)) => Ok(ProviderApi::GeminiNative),
            Some((_, span)) => Err(self.err(&format!("providers[{i}].api_surface"), span, "openai or native")),
        }
    }

    /// A Vertex provider's project and region (both required), its credential a
    /// service-account key or a token file, its base URL the host.
    pub(super) fn vertex_location(&self, i: usize, p: &RawProvider) -> Result<VertexLocation> {
        let field = |f: &str| format!("providers[{i}].{f}");
        let name_of = |value: &Option<Spanned<String>>, f: &str| -> Result<String> {
            let Some(value) = value else {
                return Err(self.err(&field(f), p.kind.span(), format!("kind = \"vertex\" needs {f}")));
            };
            let text = value.get_ref().trim();
            if text.is_empty() || text.contains(['/', '?', '#', '%', ' ', ':']) {
                return Err(self.err(&field(f), value.span(), "letters, digits, `-`, `_`, `.`"));
            }
            Ok(text.to_owned())
        };
        let location =
            VertexLocation { project: name_of(&p.project, "project")?, region: name_of(&p.region, "region")? };
        if let Some(key) = p.api_key_env.as_ref().or(p.api_key_file.as_ref()) {
            let message = "Vertex authenticates with service_account_file (or a token_file an agent refreshes)";
            return Err(self.err(&field("api_key_env"), key.span(), message));
        }
        if p.base_url.get_ref().trim_end_matches('/').ends_with("/v1") {
            let message =
                "the host alone (e.g. https://us-central1-aiplatform.googleapis.com): sluice appends /v1/projects/…";
            return Err(self.err(&field("base_url"), p.base_url.span(), message));
        }
        Ok(location)
    }

    /// A Vertex provider's protocol: Gemini's (`publisher = "google"`, the default; spoken
    /// to clients as OpenAI's) or Anthropic's (`publisher = "anthropic"`).
    pub(super) fn vertex_kind(&self, i: usize, p: &RawProvider) -> Result<ProviderKind> {
        match p.publisher.as_ref().map(|s| (s.get_ref().as_str(), s.span())) {
            None | Some(("google", _)) => Ok(ProviderKind::OpenAi),
            Some(("anthropic", _)) => Ok(ProviderKind::Anthropic),
            Some((_, span)) => Err(self.err(&format!("providers[{i}].publisher"), span, "google or anthropic")),
        }
    }
}
