//! Documents in the embedded store's `redb` file, inside the store's write transactions.
//!
//! ```text
//! docs        (kind, owner, id)   -> seq · written_at · body   (8 + 8 bytes big-endian, then the body)
//! doc_order   (kind, owner, seq)  -> id                        listing order (first write)
//! doc_ages    (written_at, seq)   -> (kind, owner, id)         retired RETENTION after the last write
//! meta        "version:<kind>"    -> u64                       grows with each record of the kind
//! doc_changes (kind, version)     -> id                        the kind's last CHANGE_LOG record writes
//! ```
//!
//! A record is a document without a `doc_ages` entry: never retired.

use redb::{ReadableTable as _, TableDefinition};

use crate::doc::{Changes, Doc, DocKey};
use crate::redis_store::{CHANGE_LOG, RETENTION};
use crate::store::millis;

type Txn = redb::WriteTransaction;

const DOCS: TableDefinition<(&str, &str, &str), &[u8]> = TableDefinition::new("docs");
const ORDER: TableDefinition<(&str, &str, u64), &str> = TableDefinition::new("doc_order");
const AGES: TableDefinition<(u64, u64), (&str, &str, &str)> = TableDefinition::new("doc_ages");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
const CHANGES: TableDefinition<(&str, u64), &str> = TableDefinition::new("doc_changes");

/// Documents retired per write (so retirement keeps pace without a timer).
const RETIRE_BATCH: usize = 4;

/// A stored document's header: its listing number and when it was last written.
struct Header {
    seq: u64,
    written: u64,
}

fn split(bytes: &[u8]) -> Option<(Header, &[u8])> {
    let seq = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
    let written = u64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
    Some((Header { seq, written }, bytes.get(16..)?))
}

/// Creates the tables (so reads find them).
pub(crate) fn open_tables(txn: &Txn) -> Result<(), redb::Error> {
    txn.open_table(DOCS)?;
    txn.open_table(ORDER)?;
    txn.open_table(AGES)?;
    Ok(())
}

fn header(txn: &Txn, key: DocKey<'_>) -> Result<Option<Header>, redb::Error> {
    let docs = txn.open_table(DOCS)?;
    let found = docs.get((key.kind, key.owner, key.id))?;
    Ok(found.and_then(|v| split(v.value()).map(|(h, _)| h)))
}

/// Stores `doc` at store time `now`, keeping its listing place when it exists.
pub(crate) fn put(txn: &Txn, now: u64, doc: &Doc) -> Result<(), redb::Error> {
    let seq = write(txn, now, doc)?;
    txn.open_table(AGES)?.insert((now, seq), (doc.kind.as_str(), doc.owner.as_str(), doc.id.as_str()))?;
    retire(txn, now)
}

/// Stores `doc` as a record (never retired) and bumps its kind's version; the new version.
pub(crate) fn put_record(txn: &Txn, now: u64, doc: &Doc) -> Result<u64, redb::Error> {
    write(txn, now, doc)?;
    let mut meta = txn.open_table(META)?;
    let name = format!("version:{}", doc.kind);
    let version = meta.get(name.as_str())?.map_or(0, |v| v.value()).saturating_add(1);
    meta.insert(name.as_str(), version)?;
    // The change log, as Redis keeps it: one entry per version, the newest CHANGE_LOG kept.
    let mut changes = txn.open_table(CHANGES)?;
    changes.insert((doc.kind.as_str(), version), doc.id.as_str())?;
    if let Some(dropped) = version.checked_sub(CHANGE_LOG) {
        changes.remove((doc.kind.as_str(), dropped))?;
    }
    Ok(version)
}

/// The records of `kind` written after version `since`, each once (in the order first
/// written), with its body now, read in one snapshot; `docs` is `None` when the log lacks
/// one of those versions (trimmed, or written before the file kept a log) or the reader is
/// ahead of the store.
pub(crate) fn since(txn: &redb::ReadTransaction, kind: &str, owner: &str, since: u64) -> Result<Changes, redb::Error> {
    let version = version(txn, kind)?;
    if version <= since {
        return Ok(Changes { version, docs: (version == since).then(Vec::new) });
    }
    let changes = match txn.open_table(CHANGES) {
        Ok(changes) => changes,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Changes { version, docs: None }),
        Err(e) => return Err(e.into()),
    };
    let mut ids: Vec<String> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut logged = 0;
    for entry in changes.range((kind, since + 1)..=(kind, version))? {
        let (_, id) = entry?;
        logged += 1;
        if seen.insert(id.value().to_owned()) {
            ids.push(id.value().to_owned());
        }
    }
    if logged != version - since {
        return Ok(Changes { version, docs: None });
    }
    let mut docs = Vec::with_capacity(ids.len());
    for id in ids {
        let body = get(txn, DocKey { kind, owner, id: &id })?;
        docs.push((id, body));
    }
    Ok(Changes { version, docs: Some(docs) })
}

/// [`put_record`], only when the stored body is `expected` (`None`: no document); `None`
/// when it is not. Inside the one write transaction, so no writer comes between.
pub(crate) fn swap_record(txn: &Txn, now: u64, doc: &Doc, expected: Option<&[u8]>) -> Result<Option<u64>, redb::Error> {
    let current = {
        let docs = txn.open_table(DOCS)?;
        let found = docs.get((doc.kind.as_str(), doc.owner.as_str(), doc.id.as_str()))?;
        found.and_then(|v| split(v.value()).map(|(_, body)| body.to_vec()))
    };
    if current.as_deref() != expected {
        return Ok(None);
    }
    put_record(txn, now, doc).map(Some)
}

/// The version of `kind`'s records.
pub(crate) fn version(txn: &redb::ReadTransaction, kind: &str) -> Result<u64, redb::Error> {
    let meta = match txn.open_table(META) {
        Ok(meta) => meta,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    Ok(meta.get(format!("version:{kind}").as_str())?.map_or(0, |v| v.value()))
}

/// Writes `doc`'s body and listing place (dropping an old age entry); its listing number.
fn write(txn: &Txn, now: u64, doc: &Doc) -> Result<u64, redb::Error> {
    let key = doc.key();
    let seq = match header(txn, key)? {
        Some(old) => {
            txn.open_table(AGES)?.remove((old.written, old.seq))?;
            old.seq
        }
        None => {
            let mut meta = txn.open_table(META)?;
            let seq = meta.get("doc_seq")?.map_or(0, |v| v.value()).saturating_add(1);
            meta.insert("doc_seq", seq)?;
            txn.open_table(ORDER)?.insert((key.kind, key.owner, seq), key.id)?;
            seq
        }
    };
    let mut value = Vec::with_capacity(16 + doc.body.len());
    value.extend_from_slice(&seq.to_be_bytes());
    value.extend_from_slice(&now.to_be_bytes());
    value.extend_from_slice(&doc.body);
    txn.open_table(DOCS)?.insert((key.kind, key.owner, key.id), value.as_slice())?;
    Ok(seq)
}

/// Removes the document; whether there was one.
pub(crate) fn delete(txn: &Txn, key: DocKey<'_>) -> Result<bool, redb::Error> {
    let Some(old) = header(txn, key)? else { return Ok(false) };
    txn.open_table(DOCS)?.remove((key.kind, key.owner, key.id))?;
    txn.open_table(ORDER)?.remove((key.kind, key.owner, old.seq))?;
    txn.open_table(AGES)?.remove((old.written, old.seq))?;
    Ok(true)
}

/// Removes a few documents last written more than [`RETENTION`] before `now`.
fn retire(txn: &Txn, now: u64) -> Result<(), redb::Error> {
    let Some(before) = now.checked_sub(millis(RETENTION)) else { return Ok(()) };
    let old: Vec<(String, String, String)> = txn
        .open_table(AGES)?
        .range(..(before, u64::MAX))?
        .take(RETIRE_BATCH)
        .filter_map(Result::ok)
        .map(|(_, v)| {
            let (kind, owner, id) = v.value();
            (kind.to_owned(), owner.to_owned(), id.to_owned())
        })
        .collect();
    for (kind, owner, id) in old {
        delete(txn, DocKey { kind: &kind, owner: &owner, id: &id })?;
    }
    Ok(())
}

/// The document's body.
pub(crate) fn get(txn: &redb::ReadTransaction, key: DocKey<'_>) -> Result<Option<Vec<u8>>, redb::Error> {
    let docs = txn.open_table(DOCS)?;
    let found = docs.get((key.kind, key.owner, key.id))?;
    Ok(found.and_then(|v| split(v.value()).map(|(_, body)| body.to_vec())))
}

/// The owner's documents of `kind`, newest first.
pub(crate) fn list(txn: &redb::ReadTransaction, kind: &str, owner: &str) -> Result<Vec<Doc>, redb::Error> {
    let order = txn.open_table(ORDER)?;
    let docs = txn.open_table(DOCS)?;
    let mut out = Vec::new();
    for entry in order.range((kind, owner, 0)..=(kind, owner, u64::MAX))?.rev() {
        let (_, id) = entry?;
        let id = id.value();
        if let Some(v) = docs.get((kind, owner, id))?
            && let Some((_, body)) = split(v.value())
        {
            out.push(Doc { kind: kind.to_owned(), owner: owner.to_owned(), id: id.to_owned(), body: body.to_vec() });
        }
    }
    Ok(out)
}
