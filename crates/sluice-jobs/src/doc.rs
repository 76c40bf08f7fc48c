//! Documents: small owner-scoped records kept beside the jobs (the Files and Batches API
//! keeps uploaded files and batch records in them). A document is a byte string under
//! `(kind, owner, id)`; only its owner can read, list or delete it. Listing is newest
//! first by first write; a document is kept [`RETENTION`](crate::redis_store::RETENTION)
//! after its last write, like a finished job.

/// A document to store or as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doc {
    /// What it is (`file`, `batch`, ...): a namespace, never shown to clients.
    pub kind: String,
    /// The owner (a tenant). Other owners never see it.
    pub owner: String,
    /// Its id within `kind` and `owner`.
    pub id: String,
    /// The content.
    pub body: Vec<u8>,
}

/// Where a document lives: its kind, owner and id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DocKey<'a> {
    /// The namespace.
    pub kind: &'a str,
    /// The owner.
    pub owner: &'a str,
    /// The id.
    pub id: &'a str,
}

impl Doc {
    /// The document's key.
    #[must_use]
    pub fn key(&self) -> DocKey<'_> {
        DocKey { kind: &self.kind, owner: &self.owner, id: &self.id }
    }
}

/// The records of a kind written after a version (see
/// [`JobStore::records_since`](crate::JobStore::records_since)).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Changes {
    /// The kind's version now.
    pub version: u64,
    /// Each record written since, once, with its body now (`None`: gone); `None` when the
    /// store cannot tell which (the reader lists every record instead).
    pub docs: Option<Vec<(String, Option<Vec<u8>>)>>,
}
