//! Address handles (`ibv_create_ah`) and the path attributes shared with QP connection.

use super::error::VerbsError;
use super::pd::ProtectionDomain;
use crate::ib::Gid;
use rdma_sys::*;
use std::mem;
use std::sync::Arc;

/// The global routing header fields of a path (needed on RoCE and across IB subnets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GlobalRoute {
    pub dgid: Gid,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
}

/// Where packets go: the remote port's LID and/or GID, via our local port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathAttr {
    pub port: u8,
    pub dlid: u16,
    pub sl: u8,
    pub grh: Option<GlobalRoute>,
}

impl PathAttr {
    pub(crate) fn to_raw(self) -> ibv_ah_attr {
        // SAFETY: ibv_ah_attr is plain data; all-zero is valid.
        let mut a: ibv_ah_attr = unsafe { mem::zeroed() };
        a.dlid = self.dlid;
        a.sl = self.sl;
        a.port_num = self.port;
        if let Some(g) = self.grh {
            a.is_global = 1;
            a.grh.dgid = ibv_gid { raw: g.dgid.0 };
            a.grh.sgid_index = g.sgid_index;
            a.grh.hop_limit = g.hop_limit;
            a.grh.traffic_class = g.traffic_class;
            a.grh.flow_label = g.flow_label;
        }
        a
    }
}

/// An address handle for UD sends; holds its PD.
pub struct AddressHandle {
    raw: *mut ibv_ah,
    pd: Arc<ProtectionDomain>,
}

// SAFETY: AHs are immutable libibverbs objects once created.
unsafe impl Send for AddressHandle {}
// SAFETY: as above.
unsafe impl Sync for AddressHandle {}

impl AddressHandle {
    pub fn new(pd: &Arc<ProtectionDomain>, path: PathAttr) -> Result<Self, VerbsError> {
        let mut attr = path.to_raw();
        // SAFETY: the PD is live (we keep a clone); `attr` is a valid, initialised ibv_ah_attr.
        let raw = unsafe { ibv_create_ah(pd.as_ptr(), &mut attr) };
        if raw.is_null() {
            return Err(VerbsError::last(
                "ibv_create_ah",
                format!("{} port {}", pd.context().name(), path.port),
            ));
        }
        Ok(AddressHandle {
            raw,
            pd: Arc::clone(pd),
        })
    }

    pub fn pd(&self) -> &Arc<ProtectionDomain> {
        &self.pd
    }

    pub(crate) fn as_ptr(&self) -> *mut ibv_ah {
        self.raw
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_create_ah and is destroyed once.
        unsafe { ibv_destroy_ah(self.raw) };
    }
}
