//! The fabric's configuration audit: what each rank says of the port it tests with
//! ([`port_config`], from the inventory's structs), and rank 0's judgement of them ([`audit`]):
//! for each [`Field`], the value most hosts report and the hosts that differ. Each rank gathers
//! its own ([`gather`]) and sends it with its hello; rank 0's coordinator audits them.

use crate::ib::Gid;
use crate::report::fabric::config::{
    ConfigFinding, Field, FindingKind, MajorityValue, PcieConfig, PortConfig, Severity, ValueGroup,
};
use crate::report::inventory::{DeviceInfo, PortInfo};
use std::collections::{HashMap, HashSet};

/// What a rank knows of its host's software that the inventory does not hold.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostSoftware {
    /// The kernel's release (`/proc/sys/kernel/osrelease`).
    pub kernel: Option<String>,
    /// The rdma-core (libibverbs) version, when it can be told.
    pub rdma_core: Option<String>,
    /// This rdmadiag's version (`crate::VERSION`).
    pub rdmadiag: Option<String>,
}

impl HostSoftware {
    /// This host's: the kernel from procfs, rdma-core from the libibverbs this process mapped
    /// (call it after a device was opened), rdmadiag from the crate.
    pub fn this_host() -> HostSoftware {
        HostSoftware {
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|k| k.trim().to_string())
                .filter(|k| !k.is_empty()),
            rdma_core: std::fs::read_to_string("/proc/self/maps")
                .ok()
                .and_then(|maps| rdma_core_from_maps(&maps)),
            rdmadiag: Some(crate::VERSION.to_string()),
        }
    }
}

/// The rdma-core release of the libibverbs mapped in a process, from its `/proc/PID/maps`:
/// rdma-core installs `libibverbs.so.1.<ABI>.<release>` (`libibverbs.so.1.14.50.0` is
/// rdma-core 50.0), and the dynamic loader maps that file, not its `libibverbs.so.1` link.
/// None when no such file is mapped (a statically linked or vendor build: not told).
pub fn rdma_core_from_maps(maps: &str) -> Option<String> {
    maps.lines().find_map(|line| {
        let file = line.rsplit('/').next()?.trim();
        let rest = file.strip_prefix("libibverbs.so.1.")?;
        let (_abi, release) = rest.split_once('.')?;
        let ok = !release.is_empty()
            && release.len() <= 16
            && release.chars().all(|c| c.is_ascii_digit() || c == '.');
        ok.then(|| release.to_string())
    })
}

/// What this rank says of `port` of `device`, tested with `gid`: the inventory read from
/// sysfs (no device opened but for an InfiniBand port's active MTU) and
/// [`HostSoftware::this_host`]. None when the inventory cannot be read: the audit leaves the
/// rank out, the run goes on.
pub fn gather(device: &str, port: u8, gid: Option<&Gid>) -> Option<PortConfig> {
    use crate::inventory::{self, PortQuery, Source};
    let dev = inventory::devices(Some(device), Source::Sysfs)
        .ok()?
        .into_iter()
        .next()?;
    let ports = inventory::ports(Some(device), Some(port), PortQuery::default()).ok()?;
    let p = ports.ports.first()?;
    Some(port_config(&dev, p, gid, &HostSoftware::this_host()))
}

/// What a rank says of `port` of `device`, tested with `gid` (None: the port's default GID).
/// Pure: everything comes from the structs the inventory already gathered.
pub fn port_config(
    device: &DeviceInfo,
    port: &PortInfo,
    gid: Option<&Gid>,
    software: &HostSoftware,
) -> PortConfig {
    let gid_type = port
        .gids
        .iter()
        .find(|g| match gid {
            Some(gid) => g.gid == *gid,
            None => g.default,
        })
        .map(|g| g.gid_type);
    let pcie = device.pcie.as_ref().map(|p| PcieConfig {
        link: p.link.clone(),
        limit: p.limited_upstream().then(|| p.limit.clone()).flatten(),
    });
    PortConfig {
        firmware: Some(device.fw_ver.clone()).filter(|f| !f.is_empty()),
        driver: device.driver.clone().or_else(|| port.netdev_driver.clone()),
        kernel: software.kernel.clone(),
        rdma_core: software.rdma_core.clone(),
        rdmadiag: software.rdmadiag.clone(),
        link_layer: Some(port.link_layer),
        rate_gbps: port.rate_gbps,
        width: port.active_width.clone(),
        active_mtu: port.active_mtu.map(|a| a.mtu),
        gid_type,
        pcie,
        numa_node: device.numa_node,
    }
}

/// The value a host reports for `field`, as findings show it; None when it does not know.
pub fn field_value(c: &PortConfig, field: Field) -> Option<String> {
    let known = |s: &Option<String>| s.clone().filter(|s| !s.trim().is_empty());
    match field {
        Field::Mtu => c.active_mtu.map(|m| m.to_string()),
        Field::Rate => c.rate_gbps.map(|r| format!("{r} Gb/s")),
        Field::Width => known(&c.width),
        Field::LinkLayer => c.link_layer.map(|l| l.to_string()),
        Field::GidType => c.gid_type.map(|g| g.to_string()),
        Field::Pcie => c.pcie.as_ref()?.effective().map(|l| l.short_text()),
        Field::Numa => c.numa_node.map(|n| n.to_string()),
        Field::Firmware => known(&c.firmware),
        Field::Driver => known(&c.driver),
        Field::Kernel => known(&c.kernel),
        Field::RdmaCore => known(&c.rdma_core),
        Field::Rdmadiag => known(&c.rdmadiag),
    }
}

/// Compare every field across `configs` (host, its port's configuration; in rank order). For
/// each field, among the hosts that report it, the value held by more hosts than any other is
/// the majority and the hosts with another value are named; with no such value (2 against 2)
/// every group is. A field whose value is the same everywhere gives no finding. A difference in
/// a field that changes the data path fails, as does one in a field of `require_same`; the
/// others are information. Hosts whose PCIe link runs below what their device could do get a
/// `below-maximum` finding too, unless the PCIe `differs` finding names them already. Failures
/// come first, then [`Field::ALL`]'s order.
pub fn audit(configs: &[(String, PortConfig)], require_same: &[Field]) -> Vec<ConfigFinding> {
    let mut findings: Vec<ConfigFinding> = Field::ALL
        .into_iter()
        .filter_map(|field| {
            let severity = if field.changes_data_path() || require_same.contains(&field) {
                Severity::Failure
            } else {
                Severity::Information
            };
            compare(configs, field, severity)
        })
        .collect();
    let named: HashSet<&str> = findings
        .iter()
        .filter(|f| f.field == Field::Pcie && f.kind == FindingKind::Differs)
        .flat_map(|f| {
            f.groups
                .iter()
                .flat_map(|g| g.hosts.iter().map(String::as_str))
        })
        .collect();
    let below = configs.iter().enumerate().filter_map(|(i, (host, c))| {
        let text = c.pcie.as_ref()?.below_maximum()?;
        (!named.contains(host.as_str())).then_some((text, i))
    });
    let reporting = configs
        .iter()
        .filter(|(_, c)| field_value(c, Field::Pcie).is_some())
        .count();
    let groups = groups_by_value(configs, below);
    if !groups.is_empty() {
        findings.push(ConfigFinding {
            field: Field::Pcie,
            kind: FindingKind::BelowMaximum,
            severity: Severity::Failure,
            majority: None,
            groups,
            reporting,
            unreported: configs.len() - reporting,
        });
    }
    findings.sort_by_key(|f| (f.severity != Severity::Failure, f.field));
    findings
}

/// Why `host` is unlike the others, from the failing `findings` that name it: "its config
/// differs: active MTU 4096 against 1024 on 3 of 4"; None when none names it. What a slow host's
/// verdict line adds.
pub fn cause(findings: &[ConfigFinding], host: &str) -> Option<String> {
    let parts: Vec<String> = findings
        .iter()
        .filter(|f| f.severity == Severity::Failure)
        .filter_map(|f| f.of_host(host))
        .collect();
    (!parts.is_empty()).then(|| format!("its config differs: {}", parts.join("; ")))
}

/// One field's finding, if its hosts do not all agree.
fn compare(
    configs: &[(String, PortConfig)],
    field: Field,
    severity: Severity,
) -> Option<ConfigFinding> {
    let values = configs
        .iter()
        .enumerate()
        .filter_map(|(i, (_, c))| field_value(c, field).map(|v| (v, i)));
    let mut groups = groups_by_value(configs, values);
    if groups.len() < 2 {
        return None;
    }
    let reporting: usize = groups.iter().map(|g| g.hosts.len()).sum();
    let (kind, majority) = if groups[0].hosts.len() > groups[1].hosts.len() {
        let top = groups.remove(0);
        let majority = MajorityValue {
            value: top.value,
            hosts: top.hosts.len(),
        };
        (FindingKind::Differs, Some(majority))
    } else {
        (FindingKind::NoMajority, None)
    };
    Some(ConfigFinding {
        field,
        kind,
        severity,
        majority,
        groups,
        reporting,
        unreported: configs.len() - reporting,
    })
}

/// The hosts of `values` (a value and the host's index in `configs`, in order) grouped by
/// value: most hosts first, then the group whose first host comes first.
fn groups_by_value(
    configs: &[(String, PortConfig)],
    values: impl Iterator<Item = (String, usize)>,
) -> Vec<ValueGroup> {
    let mut by_value: HashMap<String, Vec<usize>> = HashMap::new();
    for (value, i) in values {
        by_value.entry(value).or_default().push(i);
    }
    let mut groups: Vec<(String, Vec<usize>)> = by_value.into_iter().collect();
    groups.sort_by_key(|(_, hosts)| (std::cmp::Reverse(hosts.len()), hosts[0]));
    groups
        .into_iter()
        .map(|(value, hosts)| ValueGroup {
            value,
            hosts: hosts.into_iter().map(|i| configs[i].0.clone()).collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
