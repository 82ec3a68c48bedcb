//! Section: see the crate index. Filled in by later work in this issue.
