//! The admin routes as a table: the router is built from it, and [`crate::route_table`]
//! lists it (the OpenAPI contract test checks every listed route is documented).

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, on};

use crate::AdminState;

/// An HTTP method an admin route takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
    Put,
    Patch,
}

impl Verb {
    fn filter(self) -> MethodFilter {
        match self {
            Self::Get => MethodFilter::GET,
            Self::Post => MethodFilter::POST,
            Self::Put => MethodFilter::PUT,
            Self::Patch => MethodFilter::PATCH,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Patch => "PATCH",
        }
    }
}

/// Routes added one method at a time, each recorded as it is added.
pub(crate) struct Table {
    router: Router<AdminState>,
    listed: Vec<(&'static str, &'static str)>,
}

impl Table {
    pub(crate) fn new() -> Self {
        Self { router: Router::new(), listed: Vec::new() }
    }

    /// Serves `handler` for `verb` on `path` (several verbs on one path merge).
    pub(crate) fn add<H, T>(mut self, verb: Verb, path: &'static str, handler: H) -> Self
    where
        H: Handler<T, AdminState>,
        T: 'static,
    {
        self.router = self.router.route(path, on(verb.filter(), handler));
        self.listed.push((verb.name(), path));
        self
    }

    /// Both tables' routes.
    pub(crate) fn merge(mut self, other: Self) -> Self {
        self.router = self.router.merge(other.router);
        self.listed.extend(other.listed);
        self
    }

    /// The router.
    pub(crate) fn router(self) -> Router<AdminState> {
        self.router
    }

    /// `(METHOD, path)` of every route, in the order added.
    pub(crate) fn listed(&self) -> &[(&'static str, &'static str)] {
        &self.listed
    }
}
