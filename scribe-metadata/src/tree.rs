//! Immutable compressed radix trees over exact paths and collision keys
//! (section 12, "Repository schema 3: shared metadata snapshots").
//!
//! A tree is a canonical Patricia trie: the node for a key set holds the
//! full longest common prefix of its keys, the value whose key equals that
//! prefix, and one child per next byte. Values are never removed: a delete
//! leaves a tombstone (no state) carrying its change, so newest-change
//! summaries prune delta reads and the revision root binds deletions.
//!
//! [`Builder::apply`] applies one sorted batch of at most [`BATCH`] edits
//! with an explicit stack: every affected existing page is read once, every
//! replacement is encoded and hashed once after its changed children, and
//! unchanged subtrees keep their links. [`View`] reads pinned trees through
//! a FIFO cache of verified pages (128 entries, 2 MiB).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use redb::ReadableTable;

use crate::error::{MetadataError, Result};
use scribe_format::portable::node_link;
use scribe_format::snapshot::{decode_page, encode_page, Link, Node, NodeValue};

/// Most edits per preparation batch.
pub const BATCH: usize = 64;
/// Most pages in a read view's cache.
pub const CACHE_ENTRIES: usize = 128;
/// Most page bytes in a read view's cache.
pub const CACHE_BYTES: usize = 2 * 1024 * 1024;

/// Where pages come from.
pub trait PageSource {
    /// The verified node `link` names.
    fn load(&mut self, link: &Link) -> Result<Arc<Node>>;
}

/// Decode and verify a stored page against the full link that names it.
pub fn verify_page(link: &Link, page: &[u8]) -> Result<Node> {
    let node = decode_page(page)
        .map_err(|e| MetadataError::corrupt(format!("snapshot page {}: {e}", link.node)))?;
    let actual = node_link(&node, link.node)
        .map_err(|e| MetadataError::corrupt(format!("snapshot page {}: {e}", link.node)))?;
    if actual != *link {
        return Err(MetadataError::corrupt(format!(
            "snapshot page {} does not match the link naming it",
            link.node
        )));
    }
    Ok(node)
}

/// Pages of a redb table (read or write transaction), verified on load.
pub struct TablePages<'t, T> {
    pub table: &'t T,
}

impl<T: ReadableTable<u64, &'static [u8]>> PageSource for TablePages<'_, T> {
    fn load(&mut self, link: &Link) -> Result<Arc<Node>> {
        let page = self.table.get(link.node)?.ok_or_else(|| {
            MetadataError::corrupt(format!("snapshot page {} is missing", link.node))
        })?;
        Ok(Arc::new(verify_page(link, page.value())?))
    }
}

/// Pages prepared but not yet published, over a base source.
#[derive(Default)]
pub struct Overlay {
    /// Pages with ids above this may be dropped when superseded.
    pub droppable_above: u64,
    pub pages: BTreeMap<u64, (Arc<Node>, Vec<u8>)>,
}

impl Overlay {
    /// Total encoded bytes held.
    pub fn bytes(&self) -> usize {
        self.pages.values().map(|(_, p)| p.len()).sum()
    }

    /// Make every page held so far permanent (another root names them).
    pub fn freeze(&mut self, next_id: u64) {
        self.droppable_above = next_id;
    }
}

/// Overlay first, then a base source.
pub struct Layered<'a, S> {
    pub overlay: &'a Overlay,
    pub base: S,
}

impl<S: PageSource> PageSource for Layered<'_, S> {
    fn load(&mut self, link: &Link) -> Result<Arc<Node>> {
        if let Some((n, _)) = self.overlay.pages.get(&link.node) {
            return Ok(n.clone());
        }
        self.base.load(link)
    }
}

enum Task {
    Keep(u8, Link),
    Merge(u8, Link, Range<usize>),
    MergeLoaded(u8, Arc<Node>, Link, Range<usize>),
    Fresh(u8, Range<usize>),
}

struct Frame {
    edge: u8,
    prefix: Vec<u8>,
    value: Option<NodeValue>,
    tasks: Vec<Task>,
    next: usize,
    children: Vec<(u8, Link)>,
    /// The existing page this frame replaces, if any.
    replaces: Option<u64>,
}

/// How a [`Builder`] numbers the pages it creates. Either way every id is
/// above the one before, so a child's id is below its parent's (seed 004,
/// "Repository schema 3"); page ids are local and allocation order enters
/// no identity.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PageIds {
    /// One after another.
    #[default]
    Dense,
    /// For the streamed preparation, whose undo inventory keys a page by
    /// its id's *little-endian* bytes (`u8 6 ‖ u64 LE`): consecutive ids
    /// differ in their first byte, so the few hundred pages of one staging
    /// transaction landed on up to 256 separate leaves of `submit_stage`,
    /// each copied and written by that commit. Spread ids keep the low
    /// byte fixed for runs of 256 pages and count in the bytes above it
    /// (`id >> 8` steps by one; a run ends where it reaches a multiple of
    /// 256, and the next run takes the next low byte), so a run's keys
    /// are consecutive in the inventory and ascending in `snapshot_nodes`
    /// alike. Each page uses 256 id values of the u64 space.
    Spread,
}

impl PageIds {
    /// The id allocated after `last`.
    pub fn after(self, last: u64) -> Result<u64> {
        let next = match self {
            PageIds::Dense => last.checked_add(1),
            PageIds::Spread => {
                let q = (last >> 8) + 1;
                let low = if q.is_multiple_of(256) {
                    (last + 1) & 0xff
                } else {
                    last & 0xff
                };
                q.checked_mul(256).map(|v| v | low)
            }
        };
        next.ok_or_else(|| MetadataError::Gate(format!("no page id after {last}")))
    }
}

/// Applies sorted edit batches, allocating page ids upward from `next_id`.
pub struct Builder<'o> {
    /// The last id allocated (or the largest existing one).
    pub next_id: u64,
    /// How the next ids are chosen.
    pub ids: PageIds,
    pub overlay: &'o mut Overlay,
    /// Pages read from the source (statistics).
    pub reads: u64,
    /// Pages encoded and hashed (statistics).
    pub writes: u64,
}

impl<'o> Builder<'o> {
    pub fn new(next_id: u64, overlay: &'o mut Overlay) -> Self {
        Builder {
            next_id,
            ids: PageIds::Dense,
            overlay,
            reads: 0,
            writes: 0,
        }
    }

    /// Apply `edits` (sorted by key, unique, at most [`BATCH`]) to the tree
    /// at `root`, returning the new root link.
    pub fn apply<S: PageSource>(
        &mut self,
        base: &mut S,
        root: Link,
        edits: &[(Vec<u8>, NodeValue)],
    ) -> Result<Link> {
        if edits.is_empty() {
            return Ok(root);
        }
        debug_assert!(edits.windows(2).all(|w| w[0].0 < w[1].0));
        let first = if root.is_empty() {
            Task::Fresh(0, 0..edits.len())
        } else {
            Task::Merge(0, root, 0..edits.len())
        };
        let mut stack = vec![self.open(base, first, edits)?];
        loop {
            let top = stack
                .last_mut()
                .ok_or_else(|| MetadataError::Gate("empty stack".into()))?;
            if top.next < top.tasks.len() {
                let i = top.next;
                top.next += 1;
                let task = std::mem::replace(&mut top.tasks[i], Task::Keep(0, Link::EMPTY));
                match task {
                    Task::Keep(e, l) => top.children.push((e, l)),
                    t => {
                        let f = self.open(base, t, edits)?;
                        stack.push(f);
                    }
                }
                continue;
            }
            let Some(f) = stack.pop() else {
                return Err(MetadataError::Gate("empty stack".into()));
            };
            let link = self.finish(f.prefix, f.value, f.children, f.replaces)?;
            match stack.last_mut() {
                Some(parent) => parent.children.push((f.edge, link)),
                None => return Ok(link),
            }
        }
    }

    fn finish(
        &mut self,
        prefix: Vec<u8>,
        value: Option<NodeValue>,
        children: Vec<(u8, Link)>,
        replaces: Option<u64>,
    ) -> Result<Link> {
        if let Some(old) = replaces {
            if old > self.overlay.droppable_above {
                self.overlay.pages.remove(&old);
            }
        }
        self.next_id = self.ids.after(self.next_id)?;
        let id = self.next_id;
        let node = Node {
            prefix,
            value,
            children,
        };
        let link = node_link(&node, id)?;
        let page = encode_page(&node)?;
        self.writes += 1;
        self.overlay.pages.insert(id, (Arc::new(node), page));
        Ok(link)
    }

    fn open<S: PageSource>(
        &mut self,
        base: &mut S,
        task: Task,
        edits: &[(Vec<u8>, NodeValue)],
    ) -> Result<Frame> {
        match task {
            Task::Keep(..) => Err(MetadataError::Gate("keep task opened".into())),
            Task::Fresh(edge, r) => Ok(fresh_frame(edge, r, edits)),
            Task::Merge(edge, link, r) => {
                let node = {
                    let mut layered = Layered {
                        overlay: self.overlay,
                        base: &mut *base,
                    };
                    layered.load(&link)?
                };
                self.reads += 1;
                Ok(merge_frame(edge, node, link, r, edits))
            }
            Task::MergeLoaded(edge, node, link, r) => Ok(merge_frame(edge, node, link, r, edits)),
        }
    }
}

impl<S: PageSource + ?Sized> PageSource for &mut S {
    fn load(&mut self, link: &Link) -> Result<Arc<Node>> {
        (**self).load(link)
    }
}

/// Group `r` (keys sharing the first `depth` bytes, none equal to them) by
/// the byte at `depth`.
fn groups(
    r: Range<usize>,
    depth: usize,
    edits: &[(Vec<u8>, NodeValue)],
) -> Vec<(u8, Range<usize>)> {
    let mut out = Vec::new();
    let mut i = r.start;
    while i < r.end {
        let e = edits[i].0[depth];
        let mut j = i + 1;
        while j < r.end && edits[j].0[depth] == e {
            j += 1;
        }
        out.push((e, i..j));
        i = j;
    }
    out
}

fn fresh_frame(edge: u8, r: Range<usize>, edits: &[(Vec<u8>, NodeValue)]) -> Frame {
    let first = &edits[r.start].0;
    let last = &edits[r.end - 1].0;
    let p = lcp(first, last);
    let mut start = r.start;
    let mut value = None;
    if first.len() == p {
        value = Some(edits[start].1.clone());
        start += 1;
    }
    let tasks = groups(start..r.end, p, edits)
        .into_iter()
        .map(|(e, g)| Task::Fresh(e, g))
        .collect();
    Frame {
        edge,
        prefix: first[..p].to_vec(),
        value,
        tasks,
        next: 0,
        children: Vec::new(),
        replaces: None,
    }
}

fn merge_frame(
    edge: u8,
    node: Arc<Node>,
    link: Link,
    r: Range<usize>,
    edits: &[(Vec<u8>, NodeValue)],
) -> Frame {
    let p = &node.prefix;
    let first = &edits[r.start].0;
    let last = &edits[r.end - 1].0;
    let l = lcp(p, first).min(lcp(p, last));
    let mut start = r.start;
    if l == p.len() {
        let mut value = node.value.clone();
        if first.len() == l {
            value = Some(edits[start].1.clone());
            start += 1;
        }
        let gs = groups(start..r.end, l, edits);
        let mut tasks = Vec::with_capacity(node.children.len() + gs.len());
        let mut gi = gs.into_iter().peekable();
        for &(e, child) in &node.children {
            while let Some((ge, g)) = gi.next_if(|(ge, _)| *ge < e) {
                tasks.push(Task::Fresh(ge, g));
            }
            match gi.next_if(|(ge, _)| *ge == e) {
                Some((_, g)) => tasks.push(Task::Merge(e, child, g)),
                None => tasks.push(Task::Keep(e, child)),
            }
        }
        for (ge, g) in gi {
            tasks.push(Task::Fresh(ge, g));
        }
        Frame {
            edge,
            prefix: p.clone(),
            value,
            tasks,
            next: 0,
            children: Vec::new(),
            replaces: Some(link.node),
        }
    } else {
        // Split: a new node at the shorter common prefix, the old node below it.
        let mut value = None;
        if first.len() == l {
            value = Some(edits[start].1.clone());
            start += 1;
        }
        let old_edge = p[l];
        let prefix = p[..l].to_vec();
        let gs = groups(start..r.end, l, edits);
        let mut tasks = Vec::with_capacity(gs.len() + 1);
        let mut placed = false;
        let mut node = Some(node);
        for (ge, g) in gs {
            if !placed && old_edge < ge {
                tasks.push(Task::Keep(old_edge, link));
                placed = true;
            }
            if ge == old_edge {
                if let Some(n) = node.take() {
                    tasks.push(Task::MergeLoaded(ge, n, link, g));
                }
                placed = true;
            } else {
                tasks.push(Task::Fresh(ge, g));
            }
        }
        if !placed {
            tasks.push(Task::Keep(old_edge, link));
        }
        Frame {
            edge,
            prefix,
            value,
            tasks,
            next: 0,
            children: Vec::new(),
            replaces: None,
        }
    }
}

// ------------------------------------------------------------------ reading

/// A FIFO cache of verified pages, bounded by entries and page bytes.
#[derive(Default)]
pub struct PageCache {
    map: HashMap<u64, (Link, Arc<Node>, usize)>,
    order: VecDeque<u64>,
    bytes: usize,
}

impl PageCache {
    fn get(&self, link: &Link) -> Option<Arc<Node>> {
        match self.map.get(&link.node) {
            // Every hit still checks the full expected link.
            Some((l, n, _)) if l == link => Some(n.clone()),
            _ => None,
        }
    }

    fn put(&mut self, link: Link, node: Arc<Node>, size: usize) {
        if size > CACHE_BYTES || self.map.contains_key(&link.node) {
            return;
        }
        while self.map.len() >= CACHE_ENTRIES || self.bytes + size > CACHE_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some((_, _, s)) = self.map.remove(&old) {
                self.bytes -= s;
            }
        }
        self.order.push_back(link.node);
        self.bytes += size;
        self.map.insert(link.node, (link, node, size));
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Pages of a read transaction's table through a [`PageCache`].
pub struct CachedPages<'t, T> {
    pub table: &'t T,
    pub cache: &'t mut PageCache,
}

impl<T: ReadableTable<u64, &'static [u8]>> PageSource for CachedPages<'_, T> {
    fn load(&mut self, link: &Link) -> Result<Arc<Node>> {
        if let Some(n) = self.cache.get(link) {
            return Ok(n);
        }
        let page = self.table.get(link.node)?.ok_or_else(|| {
            MetadataError::corrupt(format!("snapshot page {} is missing", link.node))
        })?;
        let size = page.value().len();
        let node = Arc::new(verify_page(link, page.value())?);
        self.cache.put(*link, node.clone(), size);
        Ok(node)
    }
}

/// The value stored under exactly `key`, if any (live or tombstone).
pub fn lookup<S: PageSource>(src: &mut S, root: &Link, key: &[u8]) -> Result<Option<NodeValue>> {
    if root.is_empty() {
        return Ok(None);
    }
    let mut node = src.load(root)?;
    loop {
        if !key.starts_with(&node.prefix) {
            return Ok(None);
        }
        if key.len() == node.prefix.len() {
            return Ok(node.value.clone());
        }
        let e = key[node.prefix.len()];
        match node.children.iter().find(|(ce, _)| *ce == e) {
            Some((_, l)) => {
                let l = *l;
                node = src.load(&l)?;
            }
            None => return Ok(None),
        }
    }
}

/// What an in-order walk keeps.
#[derive(Clone, Copy, Debug)]
pub struct Filter {
    /// Only live values; prunes subtrees without live values.
    pub live_only: bool,
    /// Only values whose last change is above this; prunes subtrees whose
    /// newest change is not.
    pub newer_than: u64,
}

fn keep_link(filter: &Filter, l: &Link) -> bool {
    !l.is_empty() && (!filter.live_only || l.live > 0) && l.newest > filter.newer_than
}

struct WalkFrame {
    node: Arc<Node>,
    emit_value: bool,
    next_child: usize,
}

/// An in-order walk over keys `>= lower` that start with `within`.
pub struct Walk {
    stack: Vec<WalkFrame>,
    within: Vec<u8>,
    filter: Filter,
    done: bool,
}

impl Walk {
    fn keep(&self, l: &Link) -> bool {
        keep_link(&self.filter, l)
    }

    /// Start a walk at the first key `>= lower`.
    pub fn seek<S: PageSource>(
        src: &mut S,
        root: &Link,
        lower: &[u8],
        within: &[u8],
        filter: Filter,
    ) -> Result<Walk> {
        let mut w = Walk {
            stack: Vec::new(),
            within: within.to_vec(),
            filter,
            done: false,
        };
        if !w.keep(root) {
            w.done = true;
            return Ok(w);
        }
        let mut node = src.load(root)?;
        loop {
            let p = &node.prefix;
            if lower.starts_with(p) {
                if lower.len() == p.len() {
                    w.stack.push(WalkFrame {
                        node,
                        emit_value: true,
                        next_child: 0,
                    });
                    return Ok(w);
                }
                let b = lower[p.len()];
                let idx = node.children.partition_point(|(e, _)| *e < b);
                let descend = node
                    .children
                    .get(idx)
                    .filter(|(e, _)| *e == b)
                    .map(|(_, l)| *l);
                let next_child = if descend.is_some() { idx + 1 } else { idx };
                w.stack.push(WalkFrame {
                    node: node.clone(),
                    emit_value: false,
                    next_child,
                });
                match descend {
                    Some(l) if w.keep(&l) => {
                        node = src.load(&l)?;
                    }
                    _ => return Ok(w),
                }
            } else if p.as_slice() > lower {
                // Whole subtree is at or after `lower`.
                w.stack.push(WalkFrame {
                    node,
                    emit_value: true,
                    next_child: 0,
                });
                return Ok(w);
            } else {
                // Whole subtree is before `lower`.
                return Ok(w);
            }
        }
    }

    /// The next kept value, in key order.
    pub fn next<S: PageSource>(&mut self, src: &mut S) -> Result<Option<(Vec<u8>, NodeValue)>> {
        while !self.done {
            let Some(top) = self.stack.last_mut() else {
                self.done = true;
                break;
            };
            if top.emit_value {
                top.emit_value = false;
                let node = top.node.clone();
                if !node.prefix.starts_with(&self.within)
                    && node.prefix.as_slice() > self.within.as_slice()
                {
                    self.done = true;
                    break;
                }
                if let Some(v) = &node.value {
                    let live_ok = !self.filter.live_only || v.state.is_some();
                    if live_ok
                        && v.last_change > self.filter.newer_than
                        && node.prefix.starts_with(&self.within)
                    {
                        return Ok(Some((node.prefix.clone(), v.clone())));
                    }
                }
                continue;
            }
            if top.next_child < top.node.children.len() {
                let (e, l) = top.node.children[top.next_child];
                top.next_child += 1;
                if !keep_link(&self.filter, &l) {
                    continue;
                }
                // Stop once the child's range is past `within`.
                let mut min = top.node.prefix.clone();
                min.push(e);
                if !min.starts_with(&self.within) && !self.within.starts_with(&min) {
                    if min.as_slice() > self.within.as_slice() {
                        self.done = true;
                        break;
                    }
                    continue;
                }
                let child = src.load(&l)?;
                self.stack.push(WalkFrame {
                    node: child,
                    emit_value: true,
                    next_child: 0,
                });
                continue;
            }
            self.stack.pop();
        }
        Ok(None)
    }
}

/// Every value of a tree in key order (tests and `doctor`).
pub fn collect_all<S: PageSource>(src: &mut S, root: &Link) -> Result<Vec<(Vec<u8>, NodeValue)>> {
    let mut w = Walk::seek(
        src,
        root,
        b"",
        b"",
        Filter {
            live_only: false,
            newer_than: 0,
        },
    )?;
    let mut out = Vec::new();
    while let Some(kv) = w.next(src)? {
        out.push(kv);
    }
    Ok(out)
}

/// Length of the longest common prefix of `a` and `b`.
fn lcp(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use scribe_format::snapshot::FileRecord;
    use scribe_format::{FileContentId, ManifestId};

    /// Spread ids: always ascending; runs of 256 share the low byte and are
    /// ascending by their little-endian bytes too (the undo inventory's
    /// order); the next run takes the next low byte.
    #[test]
    fn spread_page_ids_ascend_in_both_byte_orders_within_a_run() {
        assert_eq!(PageIds::Dense.after(41).unwrap(), 42);
        for start in [0u64, 1, 255, 256, 12_345, 65_535 * 256 + 7, 1 << 40] {
            let mut ids = vec![start];
            for _ in 0..3_000 {
                ids.push(PageIds::Spread.after(*ids.last().unwrap()).unwrap());
            }
            assert!(ids.windows(2).all(|w| w[0] < w[1]), "from {start}");
            let allocated = &ids[1..];
            let runs: Vec<&[u64]> = allocated.chunk_by(|a, b| a & 0xff == b & 0xff).collect();
            assert!(runs.len() >= 11, "from {start}: {} runs", runs.len());
            for (i, run) in runs.iter().enumerate() {
                assert!(
                    run.windows(2)
                        .all(|w| w[0].to_le_bytes() < w[1].to_le_bytes()),
                    "from {start}: run {i} not ascending little-endian"
                );
                if i > 0 && i + 1 < runs.len() {
                    assert_eq!(run.len(), 256, "from {start}: run {i}");
                }
                if i > 0 {
                    assert_eq!(run[0] & 0xff, (runs[i - 1][0] + 1) & 0xff);
                }
            }
        }
        assert!(PageIds::Dense.after(u64::MAX).is_err());
        assert!(PageIds::Spread.after(u64::MAX - 3).is_err());
    }

    struct NoPages;
    impl PageSource for NoPages {
        fn load(&mut self, link: &Link) -> Result<Arc<Node>> {
            Err(MetadataError::corrupt(format!("no page {}", link.node)))
        }
    }

    fn val(path: &str, change: u64, live: bool) -> NodeValue {
        NodeValue {
            path: path.into(),
            last_change: change,
            state: live.then_some(FileRecord {
                manifest: ManifestId([change as u8; 32]),
                content: FileContentId([path.len() as u8; 32]),
                size: change,
                mode: 0,
                change,
            }),
        }
    }

    #[test]
    fn batches_match_the_reference_builder() {
        let mut overlay = Overlay::default();
        let mut b = Builder::new(0, &mut overlay);
        let mut model = BTreeMap::new();
        let mut root = Link::EMPTY;
        let batches: Vec<Vec<(&str, u64, bool)>> = vec![
            vec![("a", 1, true), ("ab", 1, true), ("b/c", 1, true)],
            vec![("a", 2, false), ("abc", 2, true), ("b", 2, true)],
            vec![("A", 3, true), ("b/c", 3, false), ("zz", 3, true)],
        ];
        for batch in batches {
            let edits: Vec<(Vec<u8>, NodeValue)> = batch
                .iter()
                .map(|(p, c, l)| (p.as_bytes().to_vec(), val(p, *c, *l)))
                .collect();
            for (k, v) in &edits {
                model.insert(k.clone(), v.clone());
            }
            let mut src = NoPages;
            root = b.apply(&mut src, root, &edits).unwrap();
            let entries: Vec<_> = model.clone().into_iter().collect();
            let want = scribe_format::portable::build(&entries).unwrap().root;
            assert_eq!(
                (root.live, root.newest, root.content, root.revision),
                (want.live, want.newest, want.content, want.revision)
            );
        }
    }

    /// A page store that records every read.
    struct MapPages {
        pages: HashMap<u64, Arc<Node>>,
        reads: Vec<u64>,
    }
    impl PageSource for MapPages {
        fn load(&mut self, link: &Link) -> Result<Arc<Node>> {
            self.reads.push(link.node);
            self.pages
                .get(&link.node)
                .cloned()
                .ok_or_else(|| MetadataError::corrupt("missing"))
        }
    }

    fn build(n: usize) -> (MapPages, Link, u64) {
        let mut overlay = Overlay::default();
        let mut b = Builder::new(0, &mut overlay);
        let mut root = Link::EMPTY;
        let keys: Vec<String> = (0..n).map(|i| format!("d{}/f{i:05}", i % 7)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        for chunk in sorted.chunks(BATCH) {
            let edits: Vec<_> = chunk
                .iter()
                .map(|k| (k.as_bytes().to_vec(), val(k, 1, true)))
                .collect();
            root = b.apply(&mut NoPages, root, &edits).unwrap();
        }
        let next = b.next_id;
        let pages = overlay
            .pages
            .into_iter()
            .map(|(id, (n, _))| (id, n))
            .collect();
        (
            MapPages {
                pages,
                reads: Vec::new(),
            },
            root,
            next,
        )
    }

    #[test]
    fn a_batch_reads_each_page_once_and_shares_unchanged_subtrees() {
        let (mut store, root, next) = build(1000);
        let total = store.pages.len();
        let edits: Vec<_> = ["d0/f00000", "d0/f00007", "d3/f00003", "d6/zz"]
            .iter()
            .map(|k| (k.as_bytes().to_vec(), val(k, 2, true)))
            .collect();
        let mut overlay = Overlay {
            droppable_above: next,
            pages: BTreeMap::new(),
        };
        let mut b = Builder::new(next, &mut overlay);
        let new_root = b.apply(&mut store, root, &edits).unwrap();
        let mut seen = std::collections::HashSet::new();
        assert!(
            store.reads.iter().all(|id| seen.insert(*id)),
            "a page was read twice: {:?}",
            store.reads
        );
        assert_eq!(b.reads as usize, store.reads.len());
        // Each new page is encoded and hashed once; only the changed spines are new.
        assert_eq!(b.writes as usize, overlay.pages.len());
        assert!(
            overlay.pages.len() < 40,
            "{} new pages of {total}",
            overlay.pages.len()
        );
        assert_eq!(new_root.live, 1001);
        assert_eq!(new_root.newest, 2);
        // Children always have smaller ids than their parents.
        for (id, (node, _)) in &overlay.pages {
            assert!(node.children.iter().all(|(_, l)| l.node < *id));
        }
    }

    #[test]
    fn the_page_cache_is_bounded_by_entries_and_bytes() {
        let mut c = PageCache::default();
        let node = Arc::new(Node {
            prefix: b"x".to_vec(),
            value: Some(val("x", 1, true)),
            children: Vec::new(),
        });
        for id in 1..=300u64 {
            let l = Link {
                node: id,
                ..node_link(&node, id).unwrap()
            };
            c.put(l, node.clone(), 100);
        }
        assert_eq!(c.len(), CACHE_ENTRIES);
        let l = node_link(&node, 300).unwrap();
        assert!(c.get(&l).is_some());
        let wrong = Link { newest: 9, ..l };
        assert!(c.get(&wrong).is_none(), "a hit checks the full link");
        let mut big = PageCache::default();
        for id in 1..=100u64 {
            let l = node_link(&node, id).unwrap();
            big.put(l, node.clone(), 100 * 1024);
        }
        assert!(big.bytes <= CACHE_BYTES);
        assert_eq!(big.len(), CACHE_BYTES / (100 * 1024));
    }
}
