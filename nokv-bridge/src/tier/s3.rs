//! [`Provider`] on any S3-compatible store (AWS S3, MinIO, Ceph RGW,
//! RustFS) through the object_store crate: its request signing, retries
//! and conditional requests, never hand-written HTTP.
//!
//! Create-if-absent is a PUT with `If-None-Match: *` (object_store's
//! `PutMode::Create` with the `etag` conditional-put mode). The store
//! answers 412 (or 409 while another writer races) when the key exists;
//! the bytes there are then read back and compared, so a retried upload
//! of the same block is [`Put::AlreadyPresent`] and anything else is
//! [`ProviderError::Conflict`].

use std::ops::Range;
use std::sync::{mpsc, Arc};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions,
    PutPayload, RetryConfig,
};

use super::pool::{self, BodyPool};

use super::provider::{Deleted, Head, Provider, ProviderError, Put};

/// Where the bucket is and how to sign: deployment configuration, never
/// part of a key or of anything durable.
#[derive(Clone, Debug)]
pub struct S3Config {
    /// The bucket's name.
    pub bucket: String,
    /// Keys go under this prefix (no leading or trailing `/`; may be empty).
    pub prefix: String,
    /// `http://HOST:PORT` for S3-compatible stores; `None` for AWS itself.
    pub endpoint: Option<String>,
    pub region: String,
    pub access_key: Option<String>,
    pub secret_key: Option<String>,
    /// Per-request timeout (each try).
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Tries after the first, for answers that may succeed later.
    pub retries: usize,
}

impl S3Config {
    /// `s3://BUCKET[/PREFIX]`, with the rest from `setting` (the binary
    /// passes the environment; a library never reads it):
    /// `AWS_ENDPOINT_URL`, `AWS_REGION` (default `us-east-1`),
    /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`.
    pub fn from_url(
        url: &str,
        setting: impl Fn(&str) -> Option<String>,
    ) -> Result<S3Config, String> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| format!("{url:?} is not an s3://BUCKET[/PREFIX] URL"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(format!("{url:?} names no bucket"));
        }
        let env = |k: &str| setting(k).filter(|v| !v.is_empty());
        Ok(S3Config {
            bucket: bucket.to_string(),
            prefix: prefix.trim_matches('/').to_string(),
            endpoint: env("AWS_ENDPOINT_URL"),
            region: env("AWS_REGION").unwrap_or_else(|| "us-east-1".into()),
            access_key: env("AWS_ACCESS_KEY_ID"),
            secret_key: env("AWS_SECRET_ACCESS_KEY"),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(5),
            retries: 3,
        })
    }
}

/// An S3-compatible bucket as a [`Provider`].
pub struct S3Provider {
    store: AmazonS3,
    prefix: String,
    runtime: tokio::runtime::Runtime,
    /// Whole create-if-absent puts tried again after an unavailable answer
    /// (object_store does not resend a conditional PUT whose body was
    /// partly sent; ours is safe to resend: the read-back decides).
    put_retries: usize,
    /// Buffers for GET bodies, reused (see [`pool`]).
    bodies: Arc<BodyPool>,
}

/// Most bytes of free GET body buffers kept for reuse: 16 blocks of the
/// tier's largest bundle (16 MiB). A 2 GiB cold read through the `scribe`
/// client keeps 12 GETs in flight and its read cache turns over a block
/// at a time.
const BODY_POOL_BYTES: usize = 256 << 20;

/// Most keys one `DeleteObjects` request names (S3's limit).
const DELETE_BATCH: usize = 1000;

impl S3Provider {
    pub fn new(cfg: &S3Config) -> Result<S3Provider, ProviderError> {
        let refused = |detail: String| ProviderError::Refused {
            op: "configure",
            key: format!("s3://{}", cfg.bucket),
            detail,
        };
        let mut client = ClientOptions::new()
            .with_timeout(cfg.timeout)
            .with_connect_timeout(cfg.connect_timeout);
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(&cfg.bucket)
            .with_region(&cfg.region)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_retry(RetryConfig {
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(100),
                    max_backoff: Duration::from_secs(5),
                    base: 2.0,
                },
                max_retries: cfg.retries,
                retry_timeout: cfg.timeout * (cfg.retries as u32 + 1),
            });
        if let Some(e) = &cfg.endpoint {
            if e.starts_with("http://") {
                client = client.with_allow_http(true);
            }
            b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
        }
        if let (Some(a), Some(s)) = (&cfg.access_key, &cfg.secret_key) {
            b = b.with_access_key_id(a).with_secret_access_key(s);
        }
        let store = b
            .with_client_options(client)
            .build()
            .map_err(|e| refused(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("nokv-s3")
            .enable_all()
            .build()
            .map_err(|e| refused(format!("cannot start the I/O runtime: {e}")))?;
        let bodies = BodyPool::new(BODY_POOL_BYTES);
        let idle = bodies.clone();
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(pool::IDLE / 2);
            loop {
                tick.tick().await;
                idle.trim_if_idle(pool::IDLE);
            }
        });
        Ok(S3Provider {
            store,
            prefix: cfg.prefix.clone(),
            runtime,
            put_retries: cfg.retries,
            bodies,
        })
    }

    fn path(&self, key: &str) -> Result<Path, ProviderError> {
        let full = if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}/{key}", self.prefix)
        };
        Path::parse(&full).map_err(|e| ProviderError::Refused {
            op: "name",
            key: key.to_string(),
            detail: e.to_string(),
        })
    }

    /// Run `f` on the provider's runtime from any thread (including a
    /// blocking thread of another runtime, where `block_on` would panic).
    fn run<T: Send + 'static>(
        &self,
        f: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Option<T> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.runtime.spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.recv().ok()
    }

    fn put_once(&self, path: &Path, bytes: Bytes) -> object_store::Result<()> {
        let store = self.store.clone();
        let path = path.clone();
        self.run(async move {
            let opts = PutOptions {
                mode: PutMode::Create,
                ..Default::default()
            };
            store
                .put_opts(&path, PutPayload::from_bytes(bytes), opts)
                .await
                .map(|_| ())
        })
        .unwrap_or_else(|| Err(runtime_gone()))
    }

    fn get_opts_range(
        &self,
        path: &Path,
        range: Option<Range<u64>>,
    ) -> object_store::Result<Bytes> {
        let store = self.store.clone();
        let path = path.clone();
        let bodies = self.bodies.clone();
        self.run(async move {
            let got = store
                .get_opts(&path, GetOptions::new().with_range(range))
                .await?;
            let len = got.range.end.saturating_sub(got.range.start);
            // A pooled buffer holds what the store said it sends (never
            // more than one block's worth up front: the length is the
            // store's word, not yet checked).
            let mut buf = bodies.take(len.min(MAX_BODY_RESERVE) as usize);
            let mut body = got.into_stream();
            while let Some(piece) = body.next().await {
                buf.extend_from_slice(&piece?);
            }
            Ok(bodies.bytes(buf))
        })
        .unwrap_or_else(|| Err(runtime_gone()))
    }
}

/// The most a GET body reserves before its bytes arrive (64 MiB; a
/// larger body grows its buffer as it comes).
const MAX_BODY_RESERVE: u64 = 64 << 20;

fn runtime_gone() -> object_store::Error {
    object_store::Error::Generic {
        store: "S3",
        source: "the provider's runtime stopped".into(),
    }
}

/// Whether an error may go away on its own (what [`classify`] calls
/// `Unavailable`).
fn transient(e: &object_store::Error) -> bool {
    use object_store::Error as E;
    !matches!(
        e,
        E::NotFound { .. }
            | E::PermissionDenied { .. }
            | E::Unauthenticated { .. }
            | E::NotSupported { .. }
            | E::NotImplemented { .. }
            | E::InvalidPath { .. }
            | E::AlreadyExists { .. }
            | E::Precondition { .. }
    )
}

/// Map object_store's error for `op` on `key`.
fn classify(op: &'static str, key: &str, e: object_store::Error) -> ProviderError {
    use object_store::Error as E;
    let key = key.to_string();
    match e {
        E::NotFound { .. } => ProviderError::NotFound { key },
        E::PermissionDenied { .. }
        | E::Unauthenticated { .. }
        | E::NotSupported { .. }
        | E::NotImplemented { .. }
        | E::InvalidPath { .. } => ProviderError::Refused {
            op,
            key,
            detail: e.to_string(),
        },
        // Everything else (timeouts, resets, 5xx after object_store's own
        // retries; object_store does not expose the status of a generic
        // failure) may succeed later.
        other => ProviderError::Unavailable {
            op,
            key,
            detail: other.to_string(),
        },
    }
}

impl S3Provider {
    /// One level of keys below `prefix` (object_store pages through it).
    fn list(&self, prefix: &str) -> Result<object_store::ListResult, ProviderError> {
        let path = self.path(prefix)?;
        let store = self.store.clone();
        self.run(async move { store.list_with_delimiter(Some(&path)).await })
            .unwrap_or_else(|| Err(runtime_gone()))
            .map_err(|e| classify("list", prefix, e))
    }
}

impl Provider for S3Provider {
    fn put_if_absent(&self, key: &str, bytes: Bytes) -> Result<Put, ProviderError> {
        let path = self.path(key)?;
        let mut tries = 0;
        let first = loop {
            match self.put_once(&path, bytes.clone()) {
                Err(e) if tries < self.put_retries && transient(&e) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(100 << tries.min(5)));
                }
                r => break r,
            }
        };
        match first {
            Ok(()) => Ok(Put::Created),
            Err(object_store::Error::AlreadyExists { .. })
            | Err(object_store::Error::Precondition { .. }) => {
                // The key exists: ours (a retry whose first answer was lost,
                // or a concurrent writer of the same block) or another's.
                let there = self
                    .get_opts_range(&path, None)
                    .map_err(|e| classify("put (read back)", key, e))?;
                if there.len() == bytes.len() && blake3::hash(&there) == blake3::hash(&bytes) {
                    Ok(Put::AlreadyPresent)
                } else {
                    Err(ProviderError::Conflict {
                        key: key.to_string(),
                    })
                }
            }
            Err(e) => Err(classify("put", key, e)),
        }
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes, ProviderError> {
        let path = self.path(key)?;
        if range.start >= range.end {
            return Ok(Bytes::new());
        }
        let got = self
            .get_opts_range(&path, Some(range.clone()))
            .map_err(|e| classify("get", key, e))?;
        if got.len() as u64 != range.end - range.start {
            return Err(ProviderError::ShortRead {
                key: key.to_string(),
                start: range.start,
                end: range.end,
                got: got.len() as u64,
            });
        }
        Ok(got)
    }

    fn get(&self, key: &str) -> Result<Bytes, ProviderError> {
        let path = self.path(key)?;
        self.get_opts_range(&path, None)
            .map_err(|e| classify("get", key, e))
    }

    fn head(&self, key: &str) -> Result<Option<Head>, ProviderError> {
        let path = self.path(key)?;
        let store = self.store.clone();
        let r = self
            .run(async move { store.head(&path).await })
            .unwrap_or_else(|| Err(runtime_gone()));
        match r {
            Ok(m) => Ok(Some(Head {
                len: m.size,
                etag: m.e_tag,
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(classify("head", key, e)),
        }
    }

    fn delete(&self, key: &str) -> Deleted {
        let path = match self.path(key) {
            Ok(p) => p,
            Err(e) => return Deleted::Ambiguous(e),
        };
        let store = self.store.clone();
        let r = self
            .run(async move { store.delete(&path).await })
            .unwrap_or_else(|| Err(runtime_gone()));
        match r {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Deleted::Gone,
            Err(e) => Deleted::Ambiguous(classify("delete", key, e)),
        }
    }

    /// `DeleteObjects` requests of up to 1,000 keys (object_store's
    /// `delete_stream`, one batch at a time so each outcome is known to
    /// be its key's): a key is `Gone` only when the store's answer
    /// confirms it; a batch whose request failed leaves every key of it
    /// that was not confirmed `Ambiguous`.
    fn delete_many(&self, keys: &[String]) -> Vec<Deleted> {
        let mut out: Vec<Option<Deleted>> = (0..keys.len()).map(|_| None).collect();
        for (b, batch) in keys.chunks(DELETE_BATCH).enumerate() {
            let base = b * DELETE_BATCH;
            let mut asked = Vec::with_capacity(batch.len());
            for (i, key) in batch.iter().enumerate() {
                match self.path(key) {
                    Ok(p) => asked.push((base + i, p)),
                    Err(e) => out[base + i] = Some(Deleted::Ambiguous(e)),
                }
            }
            let store = self.store.clone();
            let paths: Vec<Path> = asked.iter().map(|(_, p)| p.clone()).collect();
            let answers = self
                .run(async move {
                    let s = futures_util::stream::iter(paths.into_iter().map(Ok)).boxed();
                    store.delete_stream(s).collect::<Vec<_>>().await
                })
                .unwrap_or_else(|| vec![Err(runtime_gone())]);
            if answers.len() == asked.len() {
                // One answer per key, in order (object_store keeps it).
                for ((i, _), a) in asked.iter().zip(answers) {
                    out[*i] = Some(match a {
                        Ok(_) | Err(object_store::Error::NotFound { .. }) => Deleted::Gone,
                        Err(e) => Deleted::Ambiguous(classify("delete", &keys[*i], e)),
                    });
                }
                continue;
            }
            // The request failed as a whole: only what an answer names
            // as deleted is gone.
            let confirmed: std::collections::HashSet<Path> = answers
                .iter()
                .filter_map(|a| a.as_ref().ok().cloned())
                .collect();
            let why = answers
                .into_iter()
                .find_map(Result::err)
                .map(|e| (transient(&e), e.to_string()))
                .unwrap_or((
                    true,
                    "the store's answer named fewer keys than asked".into(),
                ));
            for (i, p) in &asked {
                out[*i] = Some(if confirmed.contains(p) {
                    Deleted::Gone
                } else {
                    let (key, detail) = (keys[*i].clone(), why.1.clone());
                    Deleted::Ambiguous(if why.0 {
                        ProviderError::Unavailable {
                            op: "delete",
                            key,
                            detail,
                        }
                    } else {
                        ProviderError::Refused {
                            op: "delete",
                            key,
                            detail,
                        }
                    })
                });
            }
        }
        out.into_iter()
            .map(|d| d.expect("every key has an outcome: set above"))
            .collect()
    }

    fn list_dirs(&self, prefix: &str) -> Result<Vec<String>, ProviderError> {
        Ok(self
            .list(prefix)?
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .collect())
    }

    fn list_names(&self, prefix: &str) -> Result<Vec<String>, ProviderError> {
        Ok(self
            .list(prefix)?
            .objects
            .iter()
            .filter_map(|o| o.location.filename().map(str::to_string))
            .collect())
    }

    fn list_keys(&self, prefix: &str) -> Result<Vec<String>, ProviderError> {
        use futures_util::TryStreamExt;
        let path = self.path(prefix)?;
        let store = self.store.clone();
        let found = self
            .run(async move {
                store
                    .list(Some(&path))
                    .map_ok(|m| m.location.to_string())
                    .try_collect::<Vec<String>>()
                    .await
            })
            .unwrap_or_else(|| Err(runtime_gone()))
            .map_err(|e| classify("list", prefix, e))?;
        let strip = if self.prefix.is_empty() {
            String::new()
        } else {
            format!("{}/", self.prefix)
        };
        Ok(found
            .into_iter()
            .filter_map(|k| k.strip_prefix(&strip).map(str::to_string))
            .collect())
    }
}
