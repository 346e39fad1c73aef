//! `rdmadiag fabric`: test every link of a cluster in rounds of pairs, on an existing launcher.

pub mod coordinator;
pub mod hostlist;
pub mod launcher;
pub mod rank;
pub mod schedule;
pub mod verdict;
