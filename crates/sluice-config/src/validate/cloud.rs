//! The cloud providers' addressing: Azure OpenAI's surfaces and `api-version`, its token
//! file, Gemini's OpenAI-compatible base URL, and Azure's RPM derived from a deployment's TPM.

use super::*;

/// Azure derives a deployment's RPM from its TPM: 6 requests per minute per 1,000 tokens.
pub const AZURE_RPM_PER_1000_TPM: u64 = 6;

impl Validator<'_> {
    /// The provider's addressing from its `kind` name; refuses the Azure fields elsewhere.
    pub(super) fn provider_api(&self, i: usize, p: &RawProvider) -> Result<ProviderApi> {
        let field = |f: &str| format!("providers[{i}].{f}");
        let kind = p.kind.get_ref().as_str();
        if kind != "azure" {
            // Gemini has surfaces too; a Vertex token may come from a file an agent refreshes.
            let surface = (kind != "gemini").then_some(("api_surface", &p.api_surface));
            let token = (kind != "vertex").then_some(("token_file", &p.token_file));
            let azure_only = [surface, Some(("api_version", &p.api_version)), token];
            if let Some((name, Some(value))) = azure_only.into_iter().flatten().find(|(_, v)| v.is_some()) {
                return Err(self.err(&field(name), value.span(), "only for kind = \"azure\""));
            }
        }
        self.google_fields_belong(i, p)?;
        if let Some(api) = self.bedrock_api(i, p)? {
            return Ok(api);
        }
        match kind {
            "gemini" => self.gemini_surface(i, p),
            "vertex" => self.vertex_location(i, p).map(ProviderApi::Vertex),
            "azure" => self.azure_surface(i, p).map(ProviderApi::Azure),
            _ => Ok(ProviderApi::Plain),
        }
    }

    /// Gemini's base URL is the host: sluice appends `/v1beta/openai/…` (native:
    /// `/v1beta/models/…`) itself.
    pub(super) fn gemini_base(&self, i: usize, p: &RawProvider) -> Result<()> {
        let url = p.base_url.get_ref().trim_end_matches('/');
        if url.ends_with("/openai") || url.ends_with("/v1beta") || url.ends_with("/v1") {
            let message = "the host alone (e.g. https://generativelanguage.googleapis.com): sluice appends \
                           /v1beta/openai/ (or /v1beta/models/ on the native surface)";
            return Err(self.err(&format!("providers[{i}].base_url"), p.base_url.span(), message));
        }
        Ok(())
    }

    fn azure_surface(&self, i: usize, p: &RawProvider) -> Result<AzureSurface> {
        let field = |f: &str| format!("providers[{i}].{f}");
        let surface = p.api_surface.as_ref().map_or(("classic", p.kind.span()), |s| (s.get_ref().as_str(), s.span()));
        match (surface, &p.api_version) {
            (("classic", _), Some(v)) if !v.get_ref().trim().is_empty() => {
                Ok(AzureSurface::Classic { api_version: v.get_ref().trim().to_owned() })
            }
            (("classic", span), _) => Err(self.err(
                &field("api_version"),
                span,
                "the classic Azure surface needs api_version (e.g. \"2024-10-21\")",
            )),
            (("v1", _), Some(v)) => {
                Err(self.err(&field("api_version"), v.span(), "the v1 surface takes no api_version"))
            }
            (("v1", _), None) => Ok(AzureSurface::V1),
            ((_, span), _) => Err(self.err(&field("api_surface"), span, "classic or v1")),
        }
    }

    /// `azure_deployment` is only for a deployment on an Azure provider; there it defaults
    /// to the model name.
    pub(super) fn azure_deployment(&self, i: usize, d: &RawDeployment, api: &ProviderApi) -> Result<Option<String>> {
        match (api, &d.azure_deployment) {
            (ProviderApi::Azure(_), name) => {
                let name = name.as_ref().map_or(d.model.get_ref(), |n| n.get_ref());
                if name.is_empty() || name.contains(['/', '?', '#', '%', ' ']) {
                    let span = d.azure_deployment.as_ref().map_or(d.model.span(), |n| n.span());
                    let message = "an Azure deployment name: letters, digits, `-`, `_`, `.`";
                    return Err(self.err(&format!("deployments[{i}].azure_deployment"), span, message));
                }
                Ok(Some(name.clone()))
            }
            (_, Some(n)) => Err(self.err(
                &format!("deployments[{i}].azure_deployment"),
                n.span(),
                "only for a provider of kind \"azure\"",
            )),
            (_, None) => Ok(None),
        }
    }
}

/// On Azure, a deployment that sets `tpm` and no `rpm` gets Azure's derived RPM (at least 1).
pub(super) fn derive_azure_rpm(limits: &mut RawLimits) {
    if limits.rpm.is_none()
        && let Some(tpm) = &limits.tpm
    {
        let rpm = (tpm.get_ref().saturating_mul(AZURE_RPM_PER_1000_TPM) / 1000).max(1);
        limits.rpm = Some(Spanned::new(tpm.span(), rpm));
    }
}
