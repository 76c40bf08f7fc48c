//! Tool calls: when a request defines tools and either forces one (`tool_choice`) or its
//! last message says `call-tool:<name>`, the answer is a call to that tool with small fixed
//! arguments instead of filler text. Both shapes share the decision and the arguments;
//! `openai::tools` and `anthropic::tools` render them.

use serde_json::Value;

use crate::tokens::Tokenizer;

/// Marker prefix asking for a call to the named tool.
pub const TOOL_MARKER: &str = "call-tool:";
/// The arguments of every simulated tool call.
pub const ARGUMENTS: &str = r#"{"query": "sluice"}"#;

/// A decided tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    /// The tool's name.
    pub name: String,
    /// The arguments, a JSON object as text.
    pub arguments: &'static str,
}

impl ToolCall {
    /// Output tokens of the call: its name and its arguments.
    #[must_use]
    pub fn tokens(&self, tok: &Tokenizer) -> u64 {
        tok.count(&self.name) + tok.count(self.arguments)
    }

    /// The arguments as a JSON value (Anthropic's `input`).
    #[must_use]
    pub fn input(&self) -> Value {
        serde_json::from_str(self.arguments).unwrap_or(Value::Null)
    }
}

/// The tool call a request asks for, if any.
///
/// `tools` and `choice` may be in either shape (OpenAI `{type: "function", function: {name}}`,
/// `"required"`, `"none"`; Anthropic `{name}`, `{type: "tool", name}`, `{type: "any"}`,
/// `{type: "none"}`). A named choice wins, then the marker (naming a defined tool), then
/// `required` / `any` (the first tool).
#[must_use]
pub fn decide(tools: Option<&Value>, choice: Option<&Value>, last_text: &str) -> Option<ToolCall> {
    let names: Vec<&str> = tools.and_then(Value::as_array)?.iter().filter_map(tool_name).collect();
    let first = *names.first()?;
    let call = |name: &str| Some(ToolCall { name: name.to_owned(), arguments: ARGUMENTS });
    let kind = choice.and_then(|c| c.as_str().or_else(|| c.get("type").and_then(Value::as_str)));
    if kind == Some("none") {
        return None;
    }
    let named = choice.and_then(|c| c.get("function").and_then(|f| f.get("name")).or_else(|| c.get("name")));
    if let Some(name) = named.and_then(Value::as_str) {
        return call(name);
    }
    if let Some(name) = marker(last_text).filter(|m| names.contains(m)) {
        return call(name);
    }
    matches!(kind, Some("required" | "any")).then(|| call(first)).flatten()
}

fn tool_name(tool: &Value) -> Option<&str> {
    tool.get("function").and_then(|f| f.get("name")).or_else(|| tool.get("name")).and_then(Value::as_str)
}

/// The tool named by a `call-tool:<name>` marker in `text`.
fn marker(text: &str) -> Option<&str> {
    let at = text.find(TOOL_MARKER)? + TOOL_MARKER.len();
    let name = text[at..].split(|c: char| c.is_whitespace() || matches!(c, ',' | '.' | ';')).next()?;
    (!name.is_empty()).then_some(name)
}

/// `text` cut into `pieces` consecutive fragments (at char boundaries; some may be empty).
#[must_use]
pub fn fragments(text: &str, pieces: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let pieces = pieces.max(1);
    let size = chars.len().div_ceil(pieces).max(1);
    let mut out: Vec<String> = chars.chunks(size).map(|c| c.iter().collect()).collect();
    out.resize(pieces.max(out.len()), String::new());
    out
}

/// Hands out the argument fragments of a streamed call, one per content chunk.
#[derive(Debug)]
pub struct Fragments {
    parts: std::vec::IntoIter<String>,
}

impl Fragments {
    /// The fragments of `call` for a stream of `output` tokens in chunks of `chunk_tokens`.
    #[must_use]
    pub fn new(call: &ToolCall, output: u64, chunk_tokens: u32) -> Self {
        let chunks = output.div_ceil(u64::from(chunk_tokens.max(1)));
        let pieces = usize::try_from(chunks).unwrap_or(1);
        Self { parts: fragments(call.arguments, pieces).into_iter() }
    }

    /// The next fragment, if any is left.
    pub fn next_part(&mut self) -> Option<String> {
        self.parts.next()
    }

    /// Everything not handed out yet.
    pub fn rest(&mut self) -> String {
        self.parts.by_ref().collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tokens::Encoding;

    fn openai_tools() -> Value {
        json!([{"type": "function", "function": {"name": "search", "parameters": {}}},
               {"type": "function", "function": {"name": "lookup"}}])
    }

    #[test]
    fn the_marker_names_a_defined_tool() {
        let tools = openai_tools();
        let call = decide(Some(&tools), None, "please call-tool:lookup now").unwrap();
        assert_eq!(call.name, "lookup");
        assert_eq!(call.input(), json!({"query": "sluice"}));
        assert_eq!(decide(Some(&tools), None, "call-tool:missing"), None);
        assert_eq!(decide(Some(&tools), None, "hello"), None);
        assert_eq!(decide(None, None, "call-tool:search"), None);
        assert_eq!(decide(Some(&tools), Some(&json!("none")), "call-tool:search"), None);
        assert_eq!(decide(Some(&tools), Some(&json!("auto")), "call-tool:search.").unwrap().name, "search");
    }

    #[test]
    fn tool_choice_forces_a_call_in_both_shapes() {
        let tools = openai_tools();
        let named = json!({"type": "function", "function": {"name": "lookup"}});
        assert_eq!(decide(Some(&tools), Some(&named), "hi").unwrap().name, "lookup");
        assert_eq!(decide(Some(&tools), Some(&json!("required")), "hi").unwrap().name, "search");
        let anthropic = json!([{"name": "search", "input_schema": {}}, {"name": "lookup", "input_schema": {}}]);
        let tool = json!({"type": "tool", "name": "lookup"});
        assert_eq!(decide(Some(&anthropic), Some(&tool), "hi").unwrap().name, "lookup");
        assert_eq!(decide(Some(&anthropic), Some(&json!({"type": "any"})), "hi").unwrap().name, "search");
        assert_eq!(decide(Some(&anthropic), Some(&json!({"type": "auto"})), "hi"), None);
        assert_eq!(decide(Some(&anthropic), Some(&json!({"type": "none"})), "call-tool:search"), None);
    }

    #[test]
    fn fragments_rebuild_the_arguments() {
        for pieces in [1, 2, 3, 7, 40] {
            let parts = fragments(ARGUMENTS, pieces);
            assert_eq!(parts.len(), pieces.max(1));
            assert_eq!(parts.concat(), ARGUMENTS);
        }
        let call = ToolCall { name: "search".into(), arguments: ARGUMENTS };
        let tok = Tokenizer::new(Encoding::Cl100kBase);
        let output = call.tokens(&tok);
        assert_eq!(output, tok.count("search") + tok.count(ARGUMENTS));
        let mut f = Fragments::new(&call, output, 3);
        let first = f.next_part().unwrap();
        assert!(!first.is_empty());
        assert_eq!(first + &f.rest(), ARGUMENTS);
    }
}
