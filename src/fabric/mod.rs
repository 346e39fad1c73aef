//! `rdmadiag fabric`: test every link of a cluster in rounds of pairs, on an existing launcher.

pub mod hostlist;
pub mod launcher;
pub mod schedule;
pub mod verdict;
