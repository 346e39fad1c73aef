//! Which ports a check run looks at: every port of every device, or the `DEV[:PORT]`s named.

use crate::inventory::{self, PortQuery};
use crate::report::check::{Check, CheckName};
use crate::report::inventory::PortInfo;
use crate::sysfs;
use anyhow::{Context as _, Result};

/// One `-d DEV[:PORT]`: a device, and one of its ports or all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub device: String,
    pub port: Option<u8>,
}

/// Parse `DEV` or `DEV:PORT` (ports count from 1).
pub fn parse_target(s: &str) -> Result<Target, String> {
    let (device, port) = match s.trim().split_once(':') {
        Some((d, p)) => {
            let port = p
                .parse::<u8>()
                .ok()
                .filter(|&n| n >= 1)
                .ok_or_else(|| format!("'{p}' is not a port number (1, 2, ...) in '{s}'"))?;
            (d, Some(port))
        }
        None => (s.trim(), None),
    };
    if device.is_empty() {
        return Err(format!(
            "'{s}' names no device (DEV or DEV:PORT, e.g. mlx5_0:1)"
        ));
    }
    Ok(Target {
        device: device.to_string(),
        port,
    })
}

/// The label of a port in the report: `DEV:PORT`.
pub fn label(device: &str, port: u8) -> String {
    format!("{device}:{port}")
}

fn missing(target: String, device: Option<&str>, port: Option<u8>, actual: String) -> Check {
    Check {
        name: CheckName::Present,
        target,
        device: device.map(String::from),
        port,
        expected: "present".into(),
        actual,
        ok: false,
        skipped: false,
        value: None,
        settings: None,
        peer: None,
    }
}

/// The ports to check, read from sysfs. A device or port that is not there is a failed
/// `present` check (pushed onto `checks`): on a node that should have it, that is the finding.
pub fn resolve(targets: &[Target], checks: &mut Vec<Check>) -> Result<Vec<PortInfo>> {
    let root = sysfs::class_root();
    let present = sysfs::kernel_devices(&root).unwrap_or_default();
    let mut wanted: Vec<(String, u8)> = Vec::new();
    if targets.is_empty() {
        if present.is_empty() {
            checks.push(missing(
                "*".into(),
                None,
                None,
                format!("no RDMA device in {}", root.display()),
            ));
        }
        for d in &present {
            wanted.extend(
                sysfs::port_numbers(&root, d)
                    .into_iter()
                    .map(|p| (d.clone(), p)),
            );
        }
    }
    for t in targets {
        if !present.contains(&t.device) {
            let have = if present.is_empty() {
                "none".to_string()
            } else {
                present.join(", ")
            };
            let target = t
                .port
                .map_or_else(|| t.device.clone(), |p| label(&t.device, p));
            checks.push(missing(
                target,
                Some(&t.device),
                t.port,
                format!("no such device (devices: {have})"),
            ));
            continue;
        }
        let ports = sysfs::port_numbers(&root, &t.device);
        match t.port {
            Some(p) if !ports.contains(&p) => checks.push(missing(
                label(&t.device, p),
                Some(&t.device),
                Some(p),
                format!(
                    "no such port ({} has {})",
                    t.device,
                    ports
                        .iter()
                        .map(u8::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )),
            Some(p) => wanted.push((t.device.clone(), p)),
            None => wanted.extend(ports.into_iter().map(|p| (t.device.clone(), p))),
        }
    }
    wanted.dedup();
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for (d, p) in wanted {
        if seen.contains(&(d.clone(), p)) {
            continue;
        }
        seen.push((d.clone(), p));
        let report = inventory::ports(Some(&d), Some(p), PortQuery::default())
            .with_context(|| format!("reading {d} port {p} from sysfs"))?;
        out.extend(report.ports);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_and_without_a_port() {
        assert_eq!(
            parse_target("mlx5_0:1").unwrap(),
            Target {
                device: "mlx5_0".into(),
                port: Some(1)
            }
        );
        assert_eq!(parse_target("rxe0").unwrap().port, None);
        assert!(
            parse_target("mlx5_0:0")
                .unwrap_err()
                .contains("not a port number")
        );
        assert!(parse_target(":1").unwrap_err().contains("names no device"));
        assert!(parse_target("mlx5_0:x").is_err());
    }
}
