//! The media cost of one content part or block as the providers shape them, shared by the
//! estimator and by the simulated provider's usage report (so both apply the same rule).

use serde_json::Value;

use super::MediaPricing;

impl MediaPricing {
    /// Media tokens of one OpenAI chat content part: `image_url` (a URL or `data:` URL,
    /// `detail`), `input_audio` (base64 `data`, `format`), `file` (`file_data` as a PDF, or
    /// a `file_id` of unknown size). 0 for text and unknown parts.
    #[must_use]
    pub fn openai_part(self, part: &Value) -> u64 {
        let str_at = |pointer| part.pointer(pointer).and_then(Value::as_str);
        match str_at("/type") {
            Some("image_url") => {
                let url = str_at("/image_url/url").or_else(|| str_at("/image_url"));
                self.image(url, str_at("/image_url/detail") == Some("low"))
            }
            Some("input_audio") => {
                str_at("/input_audio/data").map_or(0, |d| self.audio(d, str_at("/input_audio/format")))
            }
            Some("file") => self.pdf(str_at("/file/file_data")),
            _ => 0,
        }
    }

    /// Media tokens of one OpenAI Responses input part: `input_image` (`image_url` as a URL
    /// or `data:` URL, or a `file_id` of unknown size; `detail`) and `input_file`
    /// (`file_data` as a PDF, or a `file_id` / `file_url` of unknown size). 0 for text.
    #[must_use]
    pub fn responses_part(self, part: &Value) -> u64 {
        let str_at = |pointer| part.pointer(pointer).and_then(Value::as_str);
        match str_at("/type") {
            Some("input_image") => self.image(str_at("/image_url"), str_at("/detail") == Some("low")),
            Some("input_file") => self.pdf(str_at("/file_data")),
            _ => 0,
        }
    }

    /// Media tokens of one Anthropic content block: `image` (base64, url or file source) and
    /// `document` with a base64 PDF, url or file source. 0 for other blocks, including
    /// documents whose source is text or content blocks (text the tokenizer counts).
    #[must_use]
    pub fn anthropic_block(self, block: &Value) -> u64 {
        let str_at = |pointer| block.pointer(pointer).and_then(Value::as_str);
        match (str_at("/type"), str_at("/source/type")) {
            (Some("image"), _) => self.image(str_at("/source/data").or_else(|| str_at("/source/url")), false),
            (Some("document"), Some("base64")) => self.pdf(str_at("/source/data")),
            (Some("document"), Some("text" | "content")) => 0,
            (Some("document"), _) => self.pdf(None),
            _ => 0,
        }
    }
}
