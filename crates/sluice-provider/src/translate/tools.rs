//! Tool definitions and `tool_choice`, both directions.
//!
//! OpenAI `tools[] {type: "function", function: {name, description, parameters, strict}}` ⇄
//! Anthropic `tools[] {name, description, input_schema}`. `strict` and `cache_control` are
//! dropped (a validation and a caching hint). Other tool kinds (OpenAI `custom`, Anthropic
//! server tools such as `web_search_*`) have no counterpart and are refused.
//!
//! `tool_choice`: `auto` ⇄ `auto`, `none` ⇄ `none`, `required` ⇄ `any`, a named function ⇄
//! `tool`; OpenAI `parallel_tool_calls: false` ⇄ Anthropic `disable_parallel_tool_use: true`.

use serde_json::Value;

use super::error::TranslateError;
use super::json::{self, Object, object};
use crate::protocol::Protocol;

/// OpenAI `tools` as Anthropic `tools`.
pub(crate) fn defs_to_anthropic(tools: &[Value]) -> Result<Vec<Value>, TranslateError> {
    tools.iter().enumerate().map(|(i, tool)| def_to_anthropic(tool, &format!("tools[{i}]"))).collect()
}

fn def_to_anthropic(tool: &Value, path: &str) -> Result<Value, TranslateError> {
    let tool = json::as_object(tool, path)?;
    require_kind(tool, path, "function", Protocol::AnthropicMessages, "only function tools exist there")?;
    let fn_path = json::join(path, "function");
    let function = json::as_object(json::present(tool, "function").unwrap_or(&Value::Null), &fn_path)?;
    Ok(Value::Object(named_schema(function, &fn_path, "parameters", "input_schema")?))
}

/// Refuses a tool whose `type`, when given, is not `kind`: `to` has no such tool (`why`).
fn require_kind(tool: &Object, path: &str, kind: &str, to: Protocol, why: &'static str) -> Result<(), TranslateError> {
    if json::opt_str(tool, "type", path)?.is_some_and(|t| t != kind) {
        return Err(TranslateError::unsupported(json::join(path, "type"), to, why));
    }
    Ok(())
}

/// A tool definition's `name`, `description` (if any) and schema, moved from the `from`
/// key to the `to` key (an empty schema when there is none): the part both protocols share.
fn named_schema(def: &Object, path: &str, from: &str, to: &str) -> Result<Object, TranslateError> {
    let mut out = object([("name", Value::from(json::req_str(def, "name", path)?))]);
    if let Some(description) = json::opt_str(def, "description", path)? {
        out.insert("description".to_owned(), Value::from(description));
    }
    let schema = json::present(def, from).cloned().unwrap_or_else(empty_schema);
    out.insert(to.to_owned(), schema);
    Ok(out)
}

/// The schema of a function without parameters (Anthropic requires one).
fn empty_schema() -> Value {
    Value::Object(object([("type", Value::from("object")), ("properties", Value::Object(Object::new()))]))
}

/// Anthropic `tools` as OpenAI `tools`.
pub(crate) fn defs_to_openai(tools: &[Value]) -> Result<Vec<Value>, TranslateError> {
    tools.iter().enumerate().map(|(i, tool)| def_to_openai(tool, &format!("tools[{i}]"))).collect()
}

fn def_to_openai(tool: &Value, path: &str) -> Result<Value, TranslateError> {
    let tool = json::as_object(tool, path)?;
    require_kind(tool, path, "custom", Protocol::OpenAiChat, "server tools run only on Anthropic")?;
    let function = named_schema(tool, path, "input_schema", "parameters")?;
    Ok(Value::Object(object([("type", Value::from("function")), ("function", Value::Object(function))])))
}

/// OpenAI `tool_choice` and `parallel_tool_calls` as an Anthropic `tool_choice`, if any.
pub(crate) fn choice_to_anthropic(
    choice: Option<&Value>,
    parallel: Option<&Value>,
) -> Result<Option<Value>, TranslateError> {
    let no_parallel = parallel.and_then(Value::as_bool) == Some(false);
    let mut out = match choice {
        None if no_parallel => object([("type", Value::from("auto"))]),
        None => return Ok(None),
        Some(Value::String(mode)) => match mode.as_str() {
            "auto" => object([("type", Value::from("auto"))]),
            "none" => return Ok(Some(Value::Object(object([("type", Value::from("none"))])))),
            "required" => object([("type", Value::from("any"))]),
            _ => return Err(TranslateError::invalid("tool_choice", "must be auto, none, required or a function")),
        },
        Some(Value::Object(named)) => named_to_anthropic(named)?,
        Some(_) => return Err(TranslateError::invalid("tool_choice", "must be a string or an object")),
    };
    if no_parallel {
        out.insert("disable_parallel_tool_use".to_owned(), Value::Bool(true));
    }
    Ok(Some(Value::Object(out)))
}

fn named_to_anthropic(named: &Object) -> Result<Object, TranslateError> {
    if json::opt_str(named, "type", "tool_choice")? != Some("function") {
        let field = "tool_choice.type";
        return Err(TranslateError::unsupported(
            field,
            Protocol::AnthropicMessages,
            "only a named function can be forced",
        ));
    }
    let function = json::as_object(json::present(named, "function").unwrap_or(&Value::Null), "tool_choice.function")?;
    let name = json::req_str(function, "name", "tool_choice.function")?;
    Ok(object([("type", Value::from("tool")), ("name", Value::from(name))]))
}

/// Anthropic `tool_choice` as OpenAI `(tool_choice, parallel_tool_calls)`.
pub(crate) fn choice_to_openai(choice: &Value) -> Result<(Value, Option<bool>), TranslateError> {
    let choice = json::as_object(choice, "tool_choice")?;
    let parallel = match json::present(choice, "disable_parallel_tool_use") {
        Some(Value::Bool(true)) => Some(false),
        _ => None,
    };
    let openai = match json::req_str(choice, "type", "tool_choice")? {
        "auto" => Value::from("auto"),
        "none" => Value::from("none"),
        "any" => Value::from("required"),
        "tool" => {
            let function = object([("name", Value::from(json::req_str(choice, "name", "tool_choice")?))]);
            Value::Object(object([("type", Value::from("function")), ("function", Value::Object(function))]))
        }
        _ => return Err(TranslateError::invalid("tool_choice.type", "must be auto, any, tool or none")),
    };
    Ok((openai, parallel))
}

/// `{id, type: "function", function: {name, arguments}}` → `{type: "tool_use", id, name, input}`.
pub(crate) fn call_to_anthropic(call: &Value, path: &str) -> Result<Value, TranslateError> {
    let call = json::as_object(call, path)?;
    let fn_path = format!("{path}.function");
    let function = json::as_object(json::present(call, "function").unwrap_or(&Value::Null), &fn_path)?;
    let arguments = json::opt_str(function, "arguments", &fn_path)?.unwrap_or_default();
    let input = json::parse_arguments(arguments, &format!("{fn_path}.arguments"))?;
    Ok(Value::Object(object([
        ("type", Value::from("tool_use")),
        ("id", Value::from(json::req_str(call, "id", path)?)),
        ("name", Value::from(json::req_str(function, "name", &fn_path)?)),
        ("input", input),
    ])))
}

/// `{type: "tool_use", id, name, input}` → `{id, type: "function", function: {name, arguments}}`.
pub(crate) fn call_to_openai(block: &Object, path: &str) -> Result<Value, TranslateError> {
    let input = json::present(block, "input").cloned().unwrap_or_else(|| Value::Object(Object::new()));
    let function = object([
        ("name", Value::from(json::req_str(block, "name", path)?)),
        ("arguments", Value::from(input.to_string())),
    ]);
    Ok(Value::Object(object([
        ("id", Value::from(json::req_str(block, "id", path)?)),
        ("type", Value::from("function")),
        ("function", Value::Object(function)),
    ])))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn definitions_round_trip() {
        let openai = json!([{"type":"function","function":{"name":"get_weather","description":"Weather for a city",
            "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}]);
        let anthropic = defs_to_anthropic(openai.as_array().unwrap()).unwrap();
        assert_eq!(
            anthropic,
            vec![json!({"name":"get_weather","description":"Weather for a city",
                "input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}})]
        );
        let back = defs_to_openai(&anthropic).unwrap();
        assert_eq!(back[0]["function"]["parameters"], openai[0]["function"]["parameters"]);
        assert_eq!(back[0]["type"], "function");
    }

    #[test]
    fn parameterless_function_gets_an_empty_schema() {
        let anthropic = defs_to_anthropic(&[json!({"type":"function","function":{"name":"now"}})]).unwrap();
        assert_eq!(anthropic[0]["input_schema"], json!({"type":"object","properties":{}}));
    }

    #[test]
    fn server_tools_are_refused() {
        let err = defs_to_openai(&[json!({"type":"web_search_20250305","name":"web_search"})]).unwrap_err();
        assert_eq!(err.field(), Some("tools[0].type"));
        let err = defs_to_anthropic(&[json!({"type":"custom","custom":{"name":"x"}})]).unwrap_err();
        assert_eq!(err.field(), Some("tools[0].type"));
    }

    #[test]
    fn choices_map_both_ways() {
        let cases = [
            (json!("auto"), json!({"type":"auto"})),
            (json!("none"), json!({"type":"none"})),
            (json!("required"), json!({"type":"any"})),
            (json!({"type":"function","function":{"name":"f"}}), json!({"type":"tool","name":"f"})),
        ];
        for (openai, anthropic) in cases {
            assert_eq!(choice_to_anthropic(Some(&openai), None).unwrap(), Some(anthropic.clone()));
            assert_eq!(choice_to_openai(&anthropic).unwrap(), (openai, None));
        }
    }

    #[test]
    fn parallel_calls_off_maps_both_ways() {
        let anthropic = choice_to_anthropic(None, Some(&json!(false))).unwrap().unwrap();
        assert_eq!(anthropic, json!({"type":"auto","disable_parallel_tool_use":true}));
        assert_eq!(choice_to_openai(&anthropic).unwrap(), (json!("auto"), Some(false)));
        assert_eq!(choice_to_anthropic(None, Some(&json!(true))).unwrap(), None);
    }
}
