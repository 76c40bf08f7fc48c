//! Whose provider-side object a passed-through call names. Every deployment may answer
//! under one provider key, so the provider cannot tell tenants apart: sluice remembers the
//! tenant of each object created through it (see [`sluice_recall::remembered`]) and lets only that
//! tenant reach it. Per family:
//!
//! - `conversations`, `vector_stores`, `uploads`, `fine_tuning/jobs`: isolated. Creating
//!   one (`POST /v1/<family>`) remembers its id for the tenant; any path under an id
//!   (`/v1/conversations/{id}/items`, `/v1/vector_stores/{id}/files`…) is the creating
//!   tenant's alone, and answers any other as a missing one (404, no upstream call).
//!   A completed upload's file is remembered for its tenant too.
//! - Their list endpoints (`GET /v1/vector_stores`, `GET /v1/fine_tuning/jobs`) and
//!   whatever else in those families names no object of the caller's
//!   (`/v1/fine_tuning/checkpoints/…` permissions on a model): refused, as they would show
//!   or change every tenant's objects under the deployment's key.
//! - `images`, `audio`, `moderations`, `fine_tuning/alpha/graders`: they keep nothing, and
//!   pass as they are.

use axum::http::Method;
use sluice_config::Passthrough;

use crate::error::Stored;

/// What a passed-through call does with provider-side objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named<'p> {
    /// Keeps nothing.
    Nothing,
    /// Creates an object: its id, from the answer, is remembered for the caller's tenant.
    Create,
    /// Reaches object `id` (or what hangs from it); `whole` when the path is the object's
    /// own (a `DELETE` there forgets it).
    Object {
        /// Its id.
        id: &'p str,
        /// What it is, for the 404.
        what: Stored,
        /// The path names the object itself, nothing under it.
        whole: bool,
    },
    /// Lists or changes objects of every tenant: refused.
    Shared,
}

/// What `method` on `path` (of `family`) names.
#[must_use]
pub fn named<'p>(family: Passthrough, method: &Method, path: &'p str) -> Named<'p> {
    let segments: Vec<&str> = path.trim_end_matches('/').split('/').skip(3).collect();
    let what = if family == Passthrough::Conversations { Stored::Conversation } else { Stored::Object };
    let (collection, rest) = match family {
        Passthrough::Conversations | Passthrough::VectorStores | Passthrough::Uploads => (true, &segments[..]),
        Passthrough::FineTuning => match segments.split_first() {
            Some((&"jobs", rest)) => (true, rest),
            Some((&"alpha", _)) => return Named::Nothing,
            _ => return Named::Shared,
        },
        Passthrough::Completions | Passthrough::Moderations | Passthrough::Images | Passthrough::Audio => {
            (false, &segments[..])
        }
    };
    match (collection, rest) {
        (false, _) => Named::Nothing,
        (true, []) if *method == Method::POST => Named::Create,
        (true, []) => Named::Shared,
        (true, [id, more @ ..]) => Named::Object { id, what, whole: more.is_empty() },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_family_names_its_objects_and_lists_are_shared() {
        let conversations = Passthrough::Conversations;
        assert_eq!(named(conversations, &Method::POST, "/v1/conversations"), Named::Create);
        assert_eq!(named(conversations, &Method::GET, "/v1/conversations"), Named::Shared);
        let items = named(conversations, &Method::GET, "/v1/conversations/conv_1/items");
        assert_eq!(items, Named::Object { id: "conv_1", what: Stored::Conversation, whole: false });
        let store = named(Passthrough::VectorStores, &Method::DELETE, "/v1/vector_stores/vs_1");
        assert_eq!(store, Named::Object { id: "vs_1", what: Stored::Object, whole: true });
        assert_eq!(named(Passthrough::VectorStores, &Method::GET, "/v1/vector_stores/"), Named::Shared);
        assert_eq!(named(Passthrough::FineTuning, &Method::GET, "/v1/fine_tuning/jobs"), Named::Shared);
        assert_eq!(named(Passthrough::FineTuning, &Method::POST, "/v1/fine_tuning/jobs"), Named::Create);
        let job = named(Passthrough::FineTuning, &Method::POST, "/v1/fine_tuning/jobs/ftjob-1/cancel");
        assert_eq!(job, Named::Object { id: "ftjob-1", what: Stored::Object, whole: false });
        let permissions = "/v1/fine_tuning/checkpoints/ft:m/permissions";
        assert_eq!(named(Passthrough::FineTuning, &Method::GET, permissions), Named::Shared);
        assert_eq!(named(Passthrough::FineTuning, &Method::POST, "/v1/fine_tuning/alpha/graders/run"), Named::Nothing);
        let upload = named(Passthrough::Uploads, &Method::POST, "/v1/uploads/upload_1/complete");
        assert_eq!(upload, Named::Object { id: "upload_1", what: Stored::Object, whole: false });
        assert_eq!(named(Passthrough::Images, &Method::POST, "/v1/images/generations"), Named::Nothing);
    }
}
