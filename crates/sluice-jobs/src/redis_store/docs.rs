//! Documents and cancellation in Redis. Keys, under the store's hash tag:
//!
//! ```text
//! {P:jobs}:doc:<kind>:<n>:<owner>:<id>   STRING  the body (n = owner length), expires RETENTION after its last write
//! {P:jobs}:docs:<kind>:<n>:<owner>       ZSET    id by first-write number (the listing), same expiry
//! {P:jobs}:doc_seq                        STRING  first-write counter
//! {P:jobs}:version:<kind>                 STRING  grows with each record of the kind
//! {P:jobs}:changes:<kind>                 ZSET    `<version>:<id>` by version: the kind's last CHANGE_LOG record writes
//! ```
//!
//! A record is a document and index without expiry.
//!
//! An index entry whose document expired is dropped when the index is next listed.

use redis::FromRedisValue;

use super::{RETENTION, RedisJobStore};
use crate::doc::{Changes, Doc, DocKey};
use crate::job::{JobId, JobState};
use crate::machine::CANCELLED;
use crate::store::{JobStoreError, millis};

/// Record writes each kind's change log keeps: a reader further behind lists every record.
pub const CHANGE_LOG: u64 = 10_000;

/// Documents fetched per `MGET` while listing.
const LIST_CHUNK: usize = 100;

impl RedisJobStore {
    fn owner_key(&self, kind: &str, owner: &str) -> String {
        self.key(&format!("docs:{kind}:{}:{owner}", owner.len()))
    }

    fn doc_key(&self, key: DocKey<'_>) -> String {
        self.key(&format!("doc:{}:{}:{}:{}", key.kind, key.owner.len(), key.owner, key.id))
    }

    pub(super) async fn query<T: FromRedisValue>(&self, run: impl AsyncQuery<T>) -> Result<T, JobStoreError> {
        let mut conn = self.conn().await?;
        tokio::time::timeout(self.timeout, run.query(&mut conn))
            .await
            .map_err(|_| JobStoreError("redis call timed out".into()))?
            .map_err(JobStoreError::from_display)
    }

    pub(super) async fn cancel_job(&self, id: &JobId) -> Result<Option<JobState>, JobStoreError> {
        let mut invocation = self.scripts.cancel.prepare_invoke();
        invocation.key(self.job_key(id)).key(self.key("ready")).key(self.key("delayed"));
        invocation.arg(id.as_str()).arg(millis(RETENTION)).arg(CANCELLED);
        let state: String = self.call(invocation).await?;
        Ok(JobState::parse(&state))
    }

    pub(super) async fn put(&self, doc: Doc) -> Result<(), JobStoreError> {
        let mut invocation = self.scripts.put_doc.prepare_invoke();
        invocation.key(self.doc_key(doc.key())).key(self.owner_key(&doc.kind, &doc.owner)).key(self.key("doc_seq"));
        invocation.arg(&doc.id).arg(doc.body).arg(millis(RETENTION));
        let _: i64 = self.call(invocation).await?;
        Ok(())
    }

    pub(super) async fn put_kept(&self, doc: Doc) -> Result<u64, JobStoreError> {
        let mut invocation = self.scripts.put_record.prepare_invoke();
        invocation.key(self.doc_key(doc.key())).key(self.owner_key(&doc.kind, &doc.owner)).key(self.key("doc_seq"));
        invocation.key(self.key(&format!("version:{}", doc.kind)));
        invocation.key(self.key(&format!("changes:{}", doc.kind)));
        invocation.arg(&doc.id).arg(doc.body).arg(CHANGE_LOG);
        let version: i64 = self.call(invocation).await?;
        Ok(u64::try_from(version).unwrap_or(0))
    }

    pub(super) async fn swap_kept(&self, doc: Doc, expected: Option<Vec<u8>>) -> Result<Option<u64>, JobStoreError> {
        let mut invocation = self.scripts.swap_record.prepare_invoke();
        invocation.key(self.doc_key(doc.key())).key(self.owner_key(&doc.kind, &doc.owner)).key(self.key("doc_seq"));
        invocation.key(self.key(&format!("version:{}", doc.kind)));
        let present = if expected.is_some() { "1" } else { "0" };
        invocation.key(self.key(&format!("changes:{}", doc.kind)));
        invocation.arg(&doc.id).arg(doc.body).arg(present).arg(expected.unwrap_or_default()).arg(CHANGE_LOG);
        let version: i64 = self.call(invocation).await?;
        Ok(u64::try_from(version).ok())
    }

    /// The store's epoch: `{P:jobs}:epoch`, set to a random id by the first reader that
    /// finds it missing (`SET NX`, then `GET`, in one transaction).
    pub(super) async fn epoch(&self) -> Result<Option<String>, JobStoreError> {
        let key = self.key("epoch");
        let mut pipe = redis::pipe();
        pipe.atomic();
        pipe.cmd("SET").arg(&key).arg(format!("{:032x}", rand::random::<u128>())).arg("NX").ignore();
        pipe.cmd("GET").arg(&key);
        let (epoch,): (Option<String>,) = self.query(pipe).await?;
        Ok(epoch)
    }

    pub(super) async fn version(&self, kind: &str) -> Result<u64, JobStoreError> {
        let mut command = redis::cmd("GET");
        command.arg(self.key(&format!("version:{kind}")));
        let version: Option<u64> = self.query(command).await?;
        Ok(version.unwrap_or(0))
    }

    pub(super) async fn changes(&self, kind: &str, owner: &str, since: u64) -> Result<Changes, JobStoreError> {
        let mut invocation = self.scripts.records_since.prepare_invoke();
        invocation.key(self.key(&format!("version:{kind}"))).key(self.key(&format!("changes:{kind}")));
        invocation.arg(since).arg(self.doc_key(DocKey { kind, owner, id: "" }));
        let reply: Vec<Vec<u8>> = self.call(invocation).await?;
        let number = |bytes: Option<&Vec<u8>>| bytes.and_then(|b| std::str::from_utf8(b).ok()?.parse::<u64>().ok());
        let version = number(reply.first()).ok_or_else(|| JobStoreError("records_since: no version".into()))?;
        if number(reply.get(1)) != Some(1) {
            return Ok(Changes { version, docs: None });
        }
        let docs = reply.get(2..).unwrap_or_default().chunks_exact(2).map(|pair| match pair {
            [id, body] => (String::from_utf8_lossy(id).into_owned(), (!body.is_empty()).then(|| body.clone())),
            _ => (String::new(), None),
        });
        Ok(Changes { version, docs: Some(docs.collect()) })
    }

    pub(super) async fn get_body(&self, key: DocKey<'_>) -> Result<Option<Vec<u8>>, JobStoreError> {
        let mut command = redis::cmd("GET");
        command.arg(self.doc_key(key));
        self.query(command).await
    }

    pub(super) async fn delete(&self, key: DocKey<'_>) -> Result<bool, JobStoreError> {
        let mut pipe = redis::pipe();
        pipe.atomic()
            .cmd("DEL")
            .arg(self.doc_key(key))
            .cmd("ZREM")
            .arg(self.owner_key(key.kind, key.owner))
            .arg(key.id);
        let (deleted, _): (i64, i64) = self.query(pipe).await?;
        Ok(deleted == 1)
    }

    pub(super) async fn list(&self, kind: &str, owner: &str) -> Result<Vec<Doc>, JobStoreError> {
        let index = self.owner_key(kind, owner);
        let mut command = redis::cmd("ZREVRANGE");
        command.arg(&index).arg(0).arg(-1);
        let ids: Vec<String> = self.query(command).await?;
        let mut out = Vec::with_capacity(ids.len());
        let mut gone = Vec::new();
        for chunk in ids.chunks(LIST_CHUNK) {
            let mut command = redis::cmd("MGET");
            for id in chunk {
                command.arg(self.doc_key(DocKey { kind, owner, id }));
            }
            let bodies: Vec<Option<Vec<u8>>> = self.query(command).await?;
            for (id, body) in chunk.iter().zip(bodies) {
                match body {
                    Some(body) => {
                        out.push(Doc { kind: kind.to_owned(), owner: owner.to_owned(), id: id.clone(), body });
                    }
                    None => gone.push(id.clone()),
                }
            }
        }
        if !gone.is_empty() {
            let mut command = redis::cmd("ZREM");
            command.arg(&index).arg(gone);
            let _: i64 = self.query(command).await?;
        }
        Ok(out)
    }
}

/// A command or pipeline run on a connection.
pub(super) trait AsyncQuery<T> {
    fn query(
        self,
        conn: &mut sluice_redis::conn::Conn,
    ) -> impl std::future::Future<Output = redis::RedisResult<T>> + Send;
}

impl<T: FromRedisValue + Send> AsyncQuery<T> for redis::Cmd {
    async fn query(self, conn: &mut sluice_redis::conn::Conn) -> redis::RedisResult<T> {
        self.query_async(conn).await
    }
}

impl<T: FromRedisValue + Send> AsyncQuery<T> for redis::Pipeline {
    async fn query(self, conn: &mut sluice_redis::conn::Conn) -> redis::RedisResult<T> {
        self.query_async(conn).await
    }
}
