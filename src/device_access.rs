//! Finding and opening RDMA devices (the no-device errors explained) and reading GID tables.

use crate::sysfs;
use crate::verbs::{Context, DeviceList, GidEntry, PortAttr, VerbsError};
use anyhow::{Result, anyhow, bail};
use std::path::Path;
use std::sync::Arc;

/// Explain why there is no device, telling "no RDMA in the kernel" from "no device present".
pub fn no_device_message(list_error: Option<&VerbsError>, sysfs_root: &Path) -> String {
    const HINT: &str =
        "for Soft-RoCE: modprobe rdma_rxe && rdma link add rxe0 type rxe netdev IFACE";
    match sysfs::kernel_devices(sysfs_root) {
        None => {
            let why = list_error.map(|e| format!(" ({e})")).unwrap_or_default();
            format!(
                "no RDMA device: this kernel has no RDMA support loaded{why}; load your NIC's \
                 RDMA driver, or {HINT}"
            )
        }
        Some(names) if !names.is_empty() => format!(
            "no usable RDMA device: the kernel has {} but libibverbs found no userspace driver \
             for it; install the provider package (Debian/Ubuntu: ibverbs-providers) and check \
             that ib_uverbs is loaded",
            names.join(", ")
        ),
        Some(_) => format!("no RDMA device present (the kernel's RDMA core has none); {HINT}"),
    }
}

/// The device list, or the explained no-device error.
pub fn device_list() -> Result<DeviceList> {
    let root = sysfs::class_root();
    match DeviceList::new() {
        Ok(list) if list.is_empty() => bail!(no_device_message(None, &root)),
        Ok(list) => Ok(list),
        Err(e) => bail!(no_device_message(Some(&e), &root)),
    }
}

/// Open the named device, or every device when `name` is None.
pub fn open_devices(name: Option<&str>) -> Result<Vec<Arc<Context>>> {
    let list = device_list()?;
    match name {
        Some(n) => Ok(vec![
            list.find(n)
                .ok_or_else(|| unknown_device(n, &list.names()))?
                .open()?,
        ]),
        None => list
            .iter()
            .map(|d| d.open().map_err(anyhow::Error::from))
            .collect(),
    }
}

/// The error for a name that is no device's, listing the devices present.
pub fn unknown_device(name: &str, present: &[String]) -> anyhow::Error {
    anyhow!(
        "no RDMA device named '{name}'; devices present: {}",
        present.join(", ")
    )
}

/// The GID table of one port: from `ibv_query_gid_table`, or, where that verb is missing,
/// from `ibv_query_gid` plus sysfs `gid_attrs`. `port_count` sizes the device-wide query.
pub fn gid_table(
    ctx: &Context,
    port: u8,
    attr: &PortAttr,
    port_count: u8,
) -> Result<Vec<GidEntry>> {
    let len = attr.gid_tbl_len.max(0) as u32;
    if let Ok(all) = ctx.gid_table(len as usize * port_count.max(1) as usize) {
        return Ok(all.into_iter().filter(|e| e.port == port).collect());
    }
    let root = sysfs::class_root();
    let mut out = Vec::new();
    for index in 0..len {
        let Ok(gid) = ctx.query_gid(port, index) else {
            continue;
        };
        if gid.is_zero() {
            continue;
        }
        out.push(sysfs::gid_entry(
            &root,
            ctx.name(),
            port,
            index,
            gid,
            attr.link_layer,
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_device_messages_tell_the_cases_apart() {
        let base = std::env::temp_dir().join(format!("rdmadiag-nodev-{}", std::process::id()));
        let e = VerbsError::new("ibv_get_device_list", "", libc::ENOSYS);
        let none = no_device_message(Some(&e), &base.join("absent"));
        assert!(none.contains("this kernel has no RDMA support"), "{none}");
        assert!(none.contains("ENOSYS"), "{none}");
        assert!(
            none.contains("rdma link add rxe0 type rxe netdev"),
            "{none}"
        );

        std::fs::create_dir_all(base.join("empty")).unwrap();
        let empty = no_device_message(None, &base.join("empty"));
        assert!(empty.contains("no RDMA device present"), "{empty}");
        assert!(empty.contains("rdma link add"), "{empty}");

        std::fs::create_dir_all(base.join("orphan/mlx5_0")).unwrap();
        let orphan = no_device_message(None, &base.join("orphan"));
        assert!(orphan.contains("mlx5_0"), "{orphan}");
        assert!(orphan.contains("ibverbs-providers"), "{orphan}");
        std::fs::remove_dir_all(base).unwrap();
    }
}
