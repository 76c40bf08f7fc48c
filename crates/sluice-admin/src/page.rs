//! Paging of the admin API's lists (`/admin/keys`, `/admin/tenants`, `/admin/teams`):
//! `limit` (1 to [`MAX_LIMIT`], default [`DEFAULT_LIMIT`]) and `cursor` (the `next_cursor`
//! of the previous page, opaque). Items come in one stable order, each with a sort key
//! unique in its list; a page holds the items whose key follows the cursor's, so paging
//! returns every item that existed when paging began exactly once, whatever is added
//! between pages. A request with neither parameter gets the whole list, as before paging.

use serde::Deserialize;
use serde_json::{Value, json};
use sluice_server::keys::hex;

/// Items per page when `cursor` is given without `limit`.
pub const DEFAULT_LIMIT: usize = 100;
/// Most items per page.
pub const MAX_LIMIT: usize = 500;

/// A list's items, each with its sort key.
pub(super) type Items = Vec<(String, Value)>;

/// A list's query.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PageQuery {
    limit: Option<usize>,
    cursor: Option<String>,
}

/// A validated page request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Page {
    /// `None`: the whole list (neither parameter sent).
    limit: Option<usize>,
    /// The sort key the page starts after.
    after: Option<String>,
}

impl PageQuery {
    /// The page asked for.
    ///
    /// # Errors
    /// The parameter at fault and why: a `limit` out of range, a `cursor` not issued here.
    pub(super) fn page(self) -> Result<Page, (&'static str, String)> {
        let after = match self.cursor {
            Some(cursor) => Some(decode(&cursor).ok_or(("cursor", "cursor is not a next_cursor of this list".into()))?),
            None => None,
        };
        let limit = match (self.limit, &after) {
            (None, None) => None,
            (limit, _) => Some(limit.unwrap_or(DEFAULT_LIMIT)),
        };
        if limit.is_some_and(|l| !(1..=MAX_LIMIT).contains(&l)) {
            return Err(("limit", format!("limit is 1 to {MAX_LIMIT}")));
        }
        Ok(Page { limit, after })
    }
}

/// The list answer: `{"object": "list", "data", "has_more", "next_cursor"}` for `items`
/// (each with its sort key), sorted by key.
#[must_use]
pub(super) fn answer(mut items: Items, page: &Page) -> Value {
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let after = items.iter().position(|(key, _)| page.after.as_ref().is_none_or(|a| key > a));
    let rest = items.split_off(after.unwrap_or(items.len()));
    let limit = page.limit.unwrap_or(usize::MAX);
    let has_more = rest.len() > limit;
    let taken: Vec<(String, Value)> = rest.into_iter().take(limit).collect();
    let next_cursor = if has_more { taken.last().map(|(key, _)| hex(key.as_bytes())) } else { None };
    let data: Vec<Value> = taken.into_iter().map(|(_, item)| item).collect();
    json!({"object": "list", "data": data, "has_more": has_more, "next_cursor": next_cursor})
}

/// The sort key a cursor stands for.
pub(super) fn decode(cursor: &str) -> Option<String> {
    if !cursor.len().is_multiple_of(2) || cursor.is_empty() {
        return None;
    }
    let bytes: Option<Vec<u8>> =
        (0..cursor.len()).step_by(2).map(|i| u8::from_str_radix(cursor.get(i..i + 2)?, 16).ok()).collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(names: &[&str]) -> Vec<(String, Value)> {
        names.iter().map(|n| ((*n).to_owned(), json!(n))).collect()
    }

    fn page(limit: Option<usize>, cursor: Option<&str>) -> Page {
        PageQuery { limit, cursor: cursor.map(str::to_owned) }.page().unwrap_or_else(|e| panic!("{e:?}"))
    }

    #[test]
    fn pages_follow_the_cursor_and_the_last_says_no_more() {
        let first = answer(items(&["c", "a", "b"]), &page(Some(2), None));
        assert_eq!(first["data"], json!(["a", "b"]));
        assert_eq!(first["has_more"], json!(true));
        let cursor = first["next_cursor"].as_str().unwrap_or_default().to_owned();
        let second = answer(items(&["c", "a", "aa", "b"]), &page(Some(2), Some(&cursor)));
        assert_eq!(second["data"], json!(["c"]), "an item added before the cursor is not repeated");
        assert_eq!(second["has_more"], json!(false));
        assert_eq!(second["next_cursor"], Value::Null);
    }

    #[test]
    fn without_parameters_the_whole_list_and_bad_ones_are_refused() {
        assert_eq!(answer(items(&["b", "a"]), &page(None, None))["data"], json!(["a", "b"]));
        assert_eq!(page(None, Some(&hex(b"a"))).limit, Some(DEFAULT_LIMIT));
        assert_eq!(PageQuery { limit: Some(0), cursor: None }.page().map_err(|e| e.0), Err("limit"));
        assert_eq!(PageQuery { limit: Some(MAX_LIMIT + 1), cursor: None }.page().map_err(|e| e.0), Err("limit"));
        assert_eq!(PageQuery { limit: None, cursor: Some("zz".into()) }.page().map_err(|e| e.0), Err("cursor"));
    }
}
