//! The device list, an open device context, and the queries on it (device, port, GID, P_Key).

use super::error::VerbsError;
use crate::ib::{
    AtomicCap, DeviceLimits, DeviceTransport, Gid, GidEntry, GidType, LinkLayer, Mtu, NodeType,
    PhysState, PortState,
};
use rdma_sys::*;
use std::any::Any;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::mem;
use std::sync::Arc;

/// The devices libibverbs knows of (`ibv_get_device_list`), freed on drop.
pub struct DeviceList {
    list: *mut *mut ibv_device,
    len: usize,
}

impl DeviceList {
    /// List the RDMA devices. Fails with ENOSYS when the kernel has no RDMA support at all.
    pub fn new() -> Result<Self, VerbsError> {
        let mut n: i32 = 0;
        // SAFETY: `n` is a valid out-pointer; the returned array is owned by us until freed.
        let list = unsafe { ibv_get_device_list(&mut n) };
        if list.is_null() {
            return Err(VerbsError::last("ibv_get_device_list", ""));
        }
        Ok(DeviceList {
            list,
            len: n.max(0) as usize,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn iter(&self) -> impl Iterator<Item = Device<'_>> + '_ {
        (0..self.len).map(move |i| Device {
            // SAFETY: `i < len`, and the array holds `len` valid device pointers while `self` lives.
            raw: unsafe { *self.list.add(i) },
            _list: PhantomData,
        })
    }

    pub fn names(&self) -> Vec<String> {
        self.iter().map(|d| d.name()).collect()
    }

    pub fn find(&self, name: &str) -> Option<Device<'_>> {
        self.iter().find(|d| d.name() == name)
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: `list` is the non-null array from ibv_get_device_list, freed exactly once.
        // Contexts opened from it hold their own reference to the device.
        unsafe { ibv_free_device_list(self.list) }
    }
}

/// One entry of a [`DeviceList`]; it cannot outlive the list.
#[derive(Clone, Copy)]
pub struct Device<'list> {
    raw: *mut ibv_device,
    _list: PhantomData<&'list DeviceList>,
}

impl Device<'_> {
    pub fn name(&self) -> String {
        // SAFETY: `raw` is a live device; the name is a NUL-terminated string inside it.
        unsafe { CStr::from_ptr(ibv_get_device_name(self.raw)) }
            .to_string_lossy()
            .into_owned()
    }

    /// Node GUID in host byte order.
    pub fn guid(&self) -> u64 {
        // SAFETY: `raw` is a live device.
        u64::from_be(unsafe { ibv_get_device_guid(self.raw) })
    }

    pub fn node_type(&self) -> NodeType {
        // SAFETY: `raw` is a live device; reading a plain field.
        NodeType::from_raw(unsafe { (*self.raw).node_type })
    }

    pub fn transport(&self) -> DeviceTransport {
        // SAFETY: `raw` is a live device; reading a plain field.
        DeviceTransport::from_raw(unsafe { (*self.raw).transport_type })
    }

    /// Open the device. The context keeps the device alive on its own, so the list may go.
    pub fn open(&self) -> Result<Arc<Context>, VerbsError> {
        let name = self.name();
        // SAFETY: `raw` is a live device from the list.
        let raw = unsafe { ibv_open_device(self.raw) };
        if raw.is_null() {
            return Err(VerbsError::last("ibv_open_device", name));
        }
        Ok(Arc::new(Context {
            raw,
            name,
            owned: true,
            _keepalive: None,
        }))
    }
}

/// An open device (`ibv_context`), closed on drop after every child object is gone.
/// A context borrowed from librdmacm (the one behind an rdma_cm id) is not ours to close:
/// it holds its owner alive instead, so the device outlives every PD/CQ/QP made from it.
pub struct Context {
    raw: *mut ibv_context,
    name: String,
    owned: bool,
    _keepalive: Option<Arc<dyn Any + Send + Sync>>,
}

// SAFETY: libibverbs contexts are thread-safe; all mutation goes through the library.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}

impl Drop for Context {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: `raw` came from ibv_open_device; every child holds an Arc to us, so none
            // is left.
            unsafe { ibv_close_device(self.raw) };
        }
        // A borrowed context is left open; `_keepalive` (dropped after this) releases its owner.
    }
}

/// Device attributes (`ibv_query_device`), named as ibv_devinfo names them.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceAttr {
    pub fw_ver: String,
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub phys_port_cnt: u8,
    pub limits: DeviceLimits,
}

/// Port attributes (`ibv_query_port`), every field libibverbs fills.
#[derive(Debug, Clone, PartialEq)]
pub struct PortAttr {
    pub state: PortState,
    pub max_mtu: Option<Mtu>,
    pub active_mtu: Option<Mtu>,
    pub gid_tbl_len: i32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    /// `active_speed_ex` where the library and kernel report it (XDR and later do not fit the
    /// 8-bit `active_speed`), else `active_speed`.
    pub active_speed: u32,
    pub phys_state: PhysState,
    pub link_layer: LinkLayer,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `ibv_port_attr` as rdma-core 47 and later define it: the 32-bit `active_speed_ex` (XDR is
/// 0x100) follows the fields rdma-sys binds, at the next 4-byte boundary, where `repr(C)` puts it.
#[repr(C)]
struct PortAttrEx {
    attr: ibv_port_attr,
    active_speed_ex: u32,
}

// Declared here because rdma-sys 0.3 does not bind them; both are exported by libibverbs.so.1
// (rdma-core >= 32) and are what the inline `ibv_query_gid_table` in verbs.h calls.
unsafe extern "C" {
    fn _ibv_query_gid_table(
        context: *mut ibv_context,
        entries: *mut ibv_gid_entry,
        max_entries: usize,
        flags: u32,
        entry_size: usize,
    ) -> isize;
}

impl Context {
    /// Wrap a device context that someone else opened and will close (librdmacm, for the
    /// device behind an rdma_cm id). Dropping the wrapper never closes it; it holds `keepalive`
    /// until every PD/CQ/QP made from it is gone.
    ///
    /// # Safety
    /// `raw` must be an open `ibv_context` that stays open for as long as `keepalive` lives.
    pub(crate) unsafe fn borrowed(
        raw: *mut ibv_context,
        keepalive: Arc<dyn Any + Send + Sync>,
    ) -> Arc<Context> {
        // SAFETY: the caller promises `raw` is open; its `device` and the name in it live as
        // long as the context does.
        let name = unsafe { CStr::from_ptr(ibv_get_device_name((*raw).device)) }
            .to_string_lossy()
            .into_owned();
        Arc::new(Context {
            raw,
            name,
            owned: false,
            _keepalive: Some(keepalive),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn as_ptr(&self) -> *mut ibv_context {
        self.raw
    }

    pub fn query_device(&self) -> Result<DeviceAttr, VerbsError> {
        // SAFETY: ibv_device_attr is plain data; all-zero is a valid value.
        let mut a: ibv_device_attr = unsafe { mem::zeroed() };
        // SAFETY: `raw` is open; `a` is a valid out-pointer of the right type.
        let rc = unsafe { ibv_query_device(self.raw, &mut a) };
        VerbsError::check("ibv_query_device", &self.name, rc)?;
        // SAFETY: fw_ver is a NUL-terminated C string inside a 64-byte array (zeroed first).
        let fw_ver = unsafe { CStr::from_ptr(a.fw_ver.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(DeviceAttr {
            fw_ver,
            node_guid: u64::from_be(a.node_guid),
            sys_image_guid: u64::from_be(a.sys_image_guid),
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            phys_port_cnt: a.phys_port_cnt,
            limits: DeviceLimits {
                max_mr_size: a.max_mr_size,
                page_size_cap: a.page_size_cap,
                max_qp: a.max_qp,
                max_qp_wr: a.max_qp_wr,
                device_cap_flags: a.device_cap_flags,
                max_sge: a.max_sge,
                max_sge_rd: a.max_sge_rd,
                max_cq: a.max_cq,
                max_cqe: a.max_cqe,
                max_mr: a.max_mr,
                max_pd: a.max_pd,
                max_qp_rd_atom: a.max_qp_rd_atom,
                max_ee_rd_atom: a.max_ee_rd_atom,
                max_res_rd_atom: a.max_res_rd_atom,
                max_qp_init_rd_atom: a.max_qp_init_rd_atom,
                max_ee_init_rd_atom: a.max_ee_init_rd_atom,
                atomic_cap: AtomicCap::from_raw(a.atomic_cap),
                max_ee: a.max_ee,
                max_rdd: a.max_rdd,
                max_mw: a.max_mw,
                max_raw_ipv6_qp: a.max_raw_ipv6_qp,
                max_raw_ethy_qp: a.max_raw_ethy_qp,
                max_mcast_grp: a.max_mcast_grp,
                max_mcast_qp_attach: a.max_mcast_qp_attach,
                max_total_mcast_qp_attach: a.max_total_mcast_qp_attach,
                max_ah: a.max_ah,
                max_fmr: a.max_fmr,
                max_map_per_fmr: a.max_map_per_fmr,
                max_srq: a.max_srq,
                max_srq_wr: a.max_srq_wr,
                max_srq_sge: a.max_srq_sge,
                max_pkeys: a.max_pkeys,
                local_ca_ack_delay: a.local_ca_ack_delay,
            },
        })
    }

    /// The extended verbs context behind `raw`, if the provider has one. This is a correct port
    /// of verbs.h's `verbs_get_ctx`: rdma-sys compares `abi_compat` with `u32::MAX` instead of
    /// `UINTPTR_MAX`, so its version never finds the extended context on 64-bit machines.
    fn verbs_context(&self) -> Option<*mut verbs_context> {
        // SAFETY: `raw` is open; `abi_compat` is a plain pointer field.
        let abi = unsafe { (*self.raw).abi_compat } as usize;
        if abi != usize::MAX {
            return None;
        }
        let offset = mem::offset_of!(verbs_context, context);
        // SAFETY: an extended context embeds `ibv_context` as the last member of
        // `verbs_context` (container_of in C); abi_compat == UINTPTR_MAX promises exactly that.
        Some(unsafe { (self.raw as *mut u8).sub(offset) } as *mut verbs_context)
    }

    pub fn query_port(&self, port: u8) -> Result<PortAttr, VerbsError> {
        let target = format!("{} port {}", self.name, port);
        let mut ex = PortAttrEx {
            // SAFETY: ibv_port_attr is plain data; all-zero is valid (the compat path fills only
            // part).
            attr: unsafe { mem::zeroed() },
            active_speed_ex: 0,
        };
        let op_offset = mem::offset_of!(verbs_context, query_port);
        let full = mem::size_of::<verbs_context>();
        // SAFETY: `vctx` points at the live extended context; `sz` says how much of the struct
        // the library provides (fields are prepended over time), checked before reading the op.
        let op = self.verbs_context().and_then(|vctx| unsafe {
            if (*vctx).sz >= full - op_offset {
                (*vctx).query_port
            } else {
                None
            }
        });
        let rc = match op {
            // SAFETY: the library's query_port with our zeroed struct and its true size: it zeroes
            // all `len` bytes and lets the provider fill what its own ibv_port_attr holds (a
            // library without active_speed_ex leaves it 0).
            // The pointer covers the whole PortAttrEx, not only its first field.
            Some(f) => unsafe {
                let whole = &mut ex as *mut PortAttrEx as *mut ibv_port_attr;
                f(self.raw, port, whole, mem::size_of::<PortAttrEx>())
            },
            // SAFETY: the exported compat symbol fills the legacy prefix of ibv_port_attr.
            None => unsafe {
                rdma_sys::ibv_query_port(self.raw, port, &mut ex.attr as *mut _ as *mut _)
            },
        };
        VerbsError::check("ibv_query_port", target, rc)?;
        let a = ex.attr;
        Ok(PortAttr {
            state: PortState::from_raw(a.state),
            max_mtu: Mtu::from_raw(a.max_mtu),
            active_mtu: Mtu::from_raw(a.active_mtu),
            gid_tbl_len: a.gid_tbl_len,
            port_cap_flags: a.port_cap_flags,
            max_msg_sz: a.max_msg_sz,
            bad_pkey_cntr: a.bad_pkey_cntr,
            qkey_viol_cntr: a.qkey_viol_cntr,
            pkey_tbl_len: a.pkey_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            lmc: a.lmc,
            max_vl_num: a.max_vl_num,
            sm_sl: a.sm_sl,
            subnet_timeout: a.subnet_timeout,
            init_type_reply: a.init_type_reply,
            active_width: a.active_width,
            active_speed: match ex.active_speed_ex {
                0 => a.active_speed as u32,
                ex => ex,
            },
            phys_state: PhysState::from_raw(a.phys_state),
            link_layer: LinkLayer::from_raw(a.link_layer),
            flags: a.flags,
            port_cap_flags2: a.port_cap_flags2,
        })
    }

    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid, VerbsError> {
        // SAFETY: ibv_gid is 16 plain bytes.
        let mut g: ibv_gid = unsafe { mem::zeroed() };
        // SAFETY: `raw` is open; `g` is a valid out-pointer.
        let rc = unsafe { ibv_query_gid(self.raw, port, index as i32, &mut g) };
        VerbsError::check(
            "ibv_query_gid",
            format!("{} port {} index {}", self.name, port, index),
            rc,
        )?;
        // SAFETY: every bit pattern of the union is a valid [u8; 16].
        Ok(Gid(unsafe { g.raw }))
    }

    pub fn query_pkey(&self, port: u8, index: u16) -> Result<u16, VerbsError> {
        let mut pkey: u16 = 0;
        // SAFETY: `raw` is open; `pkey` is a valid out-pointer.
        let rc = unsafe { ibv_query_pkey(self.raw, port, index as i32, &mut pkey) };
        VerbsError::check(
            "ibv_query_pkey",
            format!("{} port {} index {}", self.name, port, index),
            rc,
        )?;
        Ok(u16::from_be(pkey))
    }

    /// Every valid GID of every port, with its type and netdev (`ibv_query_gid_table`).
    /// `capacity` is the sum of the ports' `gid_tbl_len`.
    pub fn gid_table(&self, capacity: usize) -> Result<Vec<GidEntry>, VerbsError> {
        let capacity = capacity.max(1);
        let mut raw: Vec<ibv_gid_entry> = (0..capacity)
            // SAFETY: ibv_gid_entry is plain data; zeroed entries are valid.
            .map(|_| unsafe { mem::zeroed() })
            .collect();
        // SAFETY: `raw` has room for `capacity` entries of the size we pass.
        let n = unsafe {
            _ibv_query_gid_table(
                self.raw,
                raw.as_mut_ptr(),
                capacity,
                0,
                mem::size_of::<ibv_gid_entry>(),
            )
        };
        if n < 0 {
            return Err(VerbsError::new(
                "ibv_query_gid_table",
                &self.name,
                (-n) as i32,
            ));
        }
        raw.truncate(n as usize);
        Ok(raw
            .iter()
            .filter_map(|e| {
                Some(GidEntry {
                    port: e.port_num as u8,
                    index: e.gid_index,
                    // SAFETY: every bit pattern of the union is a valid [u8; 16].
                    gid: Gid(unsafe { e.gid.raw }),
                    gid_type: GidType::from_raw(e.gid_type)?,
                    netdev: netdev_name(e.ndev_ifindex),
                })
            })
            .collect())
    }
}

/// The name of the network interface with this index (`if_indextoname`); None for 0.
pub fn netdev_name(ifindex: u32) -> Option<String> {
    if ifindex == 0 {
        return None;
    }
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has IF_NAMESIZE bytes as if_indextoname requires.
    let p = unsafe { libc::if_indextoname(ifindex, buf.as_mut_ptr()) };
    if p.is_null() {
        return None;
    }
    // SAFETY: on success `buf` holds a NUL-terminated name.
    Some(
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn active_speed_ex_sits_where_rdma_core_puts_it() {
        // C: ... uint8_t flags; uint16_t port_cap_flags2; uint32_t active_speed_ex;
        let after_flags2 = mem::offset_of!(ibv_port_attr, port_cap_flags2) + 2;
        assert_eq!(
            mem::offset_of!(PortAttrEx, active_speed_ex),
            after_flags2.next_multiple_of(4)
        );
    }
}
