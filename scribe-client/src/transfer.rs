//! Transfer strategies over one [`Client`]: uploads of whole objects in
//! groups or 4 MiB pieces, and verified downloads in batches or ranges.

use std::io::{Read, Write};

use scribe_format::wire::message::{self as m, max_object_bytes, MAX_OBJECT_DATA_PER_FRAME};
use scribe_format::wire::{Bytes, Request, Response};
use scribe_format::{ErrorCode, ObjectId, OperationId, WorkspaceId};

use crate::client::{expect_reply, Client, ClientError, ClientResult};

/// Objects no larger than this are uploaded in groups (`ObjectPutMany`).
pub const SMALL_OBJECT_BYTES: usize = 1 << 20;
/// Most objects in one `ObjectPutMany`.
pub const MAX_GROUP_OBJECTS: usize = 4096;

/// What [`Client::upload_missing`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UploadReport {
    /// Objects offered.
    pub offered: usize,
    /// Objects the server lacked and that were sent.
    pub sent: usize,
    /// Payload bytes sent.
    pub bytes: u64,
}

impl Client {
    /// Offer `objects`, then send each one the server lacks in pieces of at
    /// most 4 MiB under `operation`'s upload pin. A reader is read only when
    /// its object is missing; an object is held in memory while sent (at
    /// most 16 MiB for a chunk).
    pub fn upload_missing<Rd: Read>(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        objects: impl IntoIterator<Item = (ObjectId, Rd)>,
    ) -> ClientResult<UploadReport> {
        let objects: Vec<(ObjectId, Rd)> = objects.into_iter().collect();
        let ids: Vec<ObjectId> = objects.iter().map(|(id, _)| *id).collect();
        let missing: std::collections::HashSet<ObjectId> =
            self.objects_missing(repo, &ids)?.into_iter().collect();
        let mut report = UploadReport {
            offered: objects.len(),
            ..UploadReport::default()
        };
        let mut sent = std::collections::HashSet::new();
        let mut group: Vec<m::ObjectPiece> = Vec::new();
        let mut group_bytes = 0usize;
        for (id, reader) in objects {
            if !missing.contains(&id) || !sent.insert(id) {
                continue;
            }
            let limit = max_object_bytes(id.kind);
            let mut data = Vec::new();
            reader
                .take(limit + 1)
                .read_to_end(&mut data)
                .map_err(ClientError::local(format!("reading object {id}")))?;
            if data.len() as u64 > limit {
                return Err(ClientError::Server {
                    code: ErrorCode::LimitExceeded,
                    message: format!("object {id} is larger than {limit} bytes"),
                    paths: Vec::new(),
                });
            }
            report.sent += 1;
            report.bytes += data.len() as u64;
            if data.len() > SMALL_OBJECT_BYTES {
                self.put_object(repo, workspace, operation, id, &data)?;
                continue;
            }
            // Small objects travel together: one pin transaction and one
            // durable publication per group instead of per object.
            if group_bytes + data.len() > MAX_OBJECT_DATA_PER_FRAME as usize
                || group.len() >= MAX_GROUP_OBJECTS
            {
                self.flush_group(repo, workspace, operation, &mut group)?;
                group_bytes = 0;
            }
            group_bytes += data.len();
            group.push(m::ObjectPiece {
                id,
                data: Bytes(data),
            });
        }
        self.flush_group(repo, workspace, operation, &mut group)?;
        Ok(report)
    }

    fn flush_group(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        group: &mut Vec<m::ObjectPiece>,
    ) -> ClientResult<()> {
        if group.is_empty() {
            return Ok(());
        }
        self.object_put_many(m::ObjectPutMany {
            repo: repo.into(),
            operation,
            workspace,
            objects: std::mem::take(group),
        })?;
        Ok(())
    }

    /// Send one whole object in pieces of at most 4 MiB.
    pub fn put_object(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        id: ObjectId,
        data: &[u8],
    ) -> ClientResult<()> {
        self.put_pieces(repo, workspace, operation, id, data, false)
    }

    /// [`Client::put_object`], staged: the object is verified when complete
    /// and published with the connection's next publication (an explicit
    /// [`Client::objects_publish`], a full stage, or any request other
    /// than staging). Pin it first with [`Client::objects_pin_missing`].
    pub fn put_object_staged(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        id: ObjectId,
        data: &[u8],
    ) -> ClientResult<()> {
        self.put_pieces(repo, workspace, operation, id, data, true)
    }

    fn put_pieces(
        &mut self,
        repo: &str,
        workspace: WorkspaceId,
        operation: OperationId,
        id: ObjectId,
        data: &[u8],
        staged: bool,
    ) -> ClientResult<()> {
        let total_len = data.len() as u64;
        let mut offset = 0usize;
        loop {
            let end = (offset + MAX_OBJECT_DATA_PER_FRAME as usize).min(data.len());
            let piece = m::ObjectPut {
                repo: repo.into(),
                operation,
                workspace,
                id,
                total_len,
                offset: offset as u64,
                data: Bytes(Vec::new()),
            };
            let reply = self.put_piece(&piece, staged, &data[offset..end])?;
            let reply = if staged {
                expect_reply!(reply, ObjectPutStaged)?
            } else {
                expect_reply!(reply, ObjectPut)?
            };
            if reply.complete {
                return Ok(());
            }
            if reply.received != end as u64 || end == data.len() {
                return Err(ClientError::Protocol(format!(
                    "upload of {id}: the server reports {} bytes received after {end}",
                    reply.received
                )));
            }
            offset = end;
        }
    }

    /// Whole objects in one round trip per 4 MiB of data (`ObjectGetMany`),
    /// each verified against its id. Objects larger than one frame's data
    /// budget are fetched with [`Client::download`]. Results are in the
    /// order of `ids`.
    pub fn download_many(
        &mut self,
        repo: &str,
        ids: &[ObjectId],
    ) -> ClientResult<Vec<(ObjectId, Vec<u8>)>> {
        let mut out = Vec::with_capacity(ids.len());
        let mut rest = ids;
        while !rest.is_empty() {
            let ask = &rest[..rest.len().min(m::MAX_IDS_PER_GET_MANY)];
            let reply = expect_reply!(
                self.call(Request::ObjectGetMany(m::ObjectGetMany {
                    repo: repo.into(),
                    ids: ask.to_vec(),
                }))?,
                ObjectGetMany
            )?;
            if reply.objects.len() > ask.len() {
                return Err(ClientError::Protocol(format!(
                    "ObjectGetMany answered {} objects for {} ids",
                    reply.objects.len(),
                    ask.len()
                )));
            }
            let got = reply.objects.len();
            for (piece, want) in reply.objects.into_iter().zip(ask) {
                if piece.id != *want {
                    return Err(ClientError::Protocol(format!(
                        "ObjectGetMany answered {} where {want} was asked",
                        piece.id
                    )));
                }
                let actual =
                    scribe_format::id::object_identity(want.kind, &piece.data.0).map_err(|e| {
                        ClientError::Corrupt {
                            id: *want,
                            detail: e.to_string(),
                        }
                    })?;
                if actual != *want {
                    return Err(ClientError::Corrupt {
                        id: *want,
                        detail: format!("the bytes hash to {actual}"),
                    });
                }
                out.push((*want, piece.data.0));
            }
            rest = &rest[got..];
            if got == 0 {
                // The next object is larger than one reply: ranges.
                let id = rest[0];
                out.push((id, self.download(repo, id)?));
                rest = &rest[1..];
            }
        }
        Ok(out)
    }

    /// Download an object's payload, verifying its identity.
    pub fn download(&mut self, repo: &str, id: ObjectId) -> ClientResult<Vec<u8>> {
        let mut out = Vec::new();
        self.download_to(repo, id, &mut out)?;
        Ok(out)
    }

    /// Stream an object's payload into `out` in 4 MiB ranges, verifying
    /// its identity at the end. On [`ClientError::Corrupt`] the bytes
    /// already written must be discarded.
    pub fn download_to(
        &mut self,
        repo: &str,
        id: ObjectId,
        out: &mut impl Write,
    ) -> ClientResult<u64> {
        let mut hasher = scribe_format::id::IdentityHasher::new(id.kind);
        let mut offset = 0u64;
        let mut total = None;
        loop {
            let piece = self.object_get(m::ObjectGet {
                repo: repo.into(),
                id,
                offset,
                max_len: MAX_OBJECT_DATA_PER_FRAME,
            })?;
            let t = *total.get_or_insert(piece.total_len);
            if piece.total_len != t || piece.offset != offset {
                return Err(ClientError::Protocol(format!(
                    "download of {id}: inconsistent ranges"
                )));
            }
            if t > max_object_bytes(id.kind).max(1 << 40) {
                return Err(ClientError::Protocol(format!(
                    "object {id} claims {t} bytes"
                )));
            }
            hasher
                .update(&piece.data.0)
                .map_err(|e| ClientError::Corrupt {
                    id,
                    detail: e.to_string(),
                })?;
            out.write_all(&piece.data.0)
                .map_err(ClientError::local(format!("writing object {id}")))?;
            offset += piece.data.0.len() as u64;
            if offset >= t {
                break;
            }
            if piece.data.0.is_empty() {
                return Err(ClientError::Protocol(format!(
                    "download of {id}: empty range before the end"
                )));
            }
        }
        let got = hasher.finish().map_err(|e| ClientError::Corrupt {
            id,
            detail: e.to_string(),
        })?;
        if got != id {
            return Err(ClientError::Corrupt {
                id,
                detail: format!("the bytes hash to {got}"),
            });
        }
        Ok(offset)
    }
}
