//! Parsing of sizes ("4K" = 4096), durations ("10s") and MTUs given on the command line.

use clap::ValueEnum;
use std::time::Duration;

/// Bandwidth units for tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Units {
    /// Gigabits per second (10^9 bits).
    Gbit,
    /// Mebibytes per second (2^20 bytes), as perftest prints by default.
    Mib,
}

impl Units {
    /// The unit as table headers and values spell it.
    pub fn label(self) -> &'static str {
        match self {
            Units::Gbit => "Gb/s",
            Units::Mib => "MiB/s",
        }
    }
}

/// Parse a byte count with an optional binary suffix: 4096, 4K, 4KiB, 64k, 1M, 2G.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    if num.is_empty() {
        return Err(format!("'{s}' is not a size (examples: 64, 4K, 1M)"));
    }
    let n: u64 = num.parse().map_err(|_| format!("'{s}' is too large"))?;
    let mult: u64 = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        _ => return Err(format!("'{s}' has an unknown unit (use K, M or G: binary)")),
    };
    let v = n
        .checked_mul(mult)
        .ok_or_else(|| format!("'{s}' is too large"))?;
    if v == 0 {
        return Err("a size must be at least 1 byte".into());
    }
    Ok(v)
}

/// A size that fits the 32-bit length of a verbs work request.
pub fn parse_msg_size(s: &str) -> Result<u32, String> {
    let v = parse_size(s)?;
    u32::try_from(v)
        .map_err(|_| format!("'{s}' is larger than 4 GiB - 1, the largest RDMA message"))
}

/// A non-zero duration in humantime form: 10s, 500ms, 2m.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(s.trim())
        .map_err(|e| format!("'{s}' is not a duration ({e}; examples: 10s, 500ms, 2m)"))?;
    if d.is_zero() {
        return Err("a duration must be longer than zero".into());
    }
    Ok(d)
}

/// An RDMA path MTU: 256, 512, 1024, 2048 or 4096 (suffixes allowed: 4K).
pub fn parse_mtu(s: &str) -> Result<u32, String> {
    let v = parse_size(s)?;
    match v {
        256 | 512 | 1024 | 2048 | 4096 => Ok(v as u32),
        _ => Err(format!(
            "'{s}' is not an RDMA MTU (256, 512, 1024, 2048 or 4096)"
        )),
    }
}

/// A data rate in bits per second: 90Gb/s, 90Gbps, 100G (bits), 5000MiB/s, 12.5GB/s (bytes).
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a rate (examples: 90Gb/s, 5000MiB/s)"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err("a rate must be greater than zero".into());
    }
    let unit = unit.trim().trim_end_matches("/s").trim_end_matches("ps");
    let mult = match unit {
        "" | "b" => 1.0,
        "K" | "k" | "Kb" | "kb" => 1e3,
        "M" | "Mb" => 1e6,
        "G" | "Gb" => 1e9,
        "T" | "Tb" => 1e12,
        "B" => 8.0,
        "KB" | "kB" => 8e3,
        "MB" => 8e6,
        "GB" => 8e9,
        "KiB" => 8.0 * 1024.0,
        "MiB" => 8.0 * 1024.0 * 1024.0,
        "GiB" => 8.0 * 1024.0 * 1024.0 * 1024.0,
        _ => {
            return Err(format!(
                "'{s}': unknown unit (use Gb/s, Mb/s for bits; GB/s, MiB/s for bytes)"
            ));
        }
    };
    Ok(n * mult)
}

/// A latency percentile: 50, 90, 99, 99.9 or 99.99.
pub fn parse_percentile(s: &str) -> Result<f64, String> {
    match s.trim().trim_end_matches('%') {
        "50" | "median" => Ok(50.0),
        "90" => Ok(90.0),
        "99" => Ok(99.0),
        "99.9" => Ok(99.9),
        "99.99" => Ok(99.99),
        _ => Err(format!("'{s}' is not one of 50, 90, 99, 99.9, 99.99")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4K"), Ok(4096));
        assert_eq!(parse_size("4kib"), Ok(4096));
        assert_eq!(parse_size("64KB"), Ok(65536));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        for bad in [
            "",
            "0",
            "K",
            "-1",
            "4X",
            "1.5K",
            "99999999999999999999",
            "18446744073709551615G",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?}");
        }
        assert!(parse_msg_size("4G").is_err());
        assert_eq!(parse_msg_size("8M"), Ok(8 << 20));
    }

    #[test]
    fn durations_and_mtus() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_mtu("4K"), Ok(4096));
        assert_eq!(parse_mtu("1024"), Ok(1024));
        assert!(parse_mtu("1500").is_err());
    }

    #[test]
    fn rates_in_bits_or_bytes() {
        assert_eq!(parse_rate("90Gb/s"), Ok(90e9));
        assert_eq!(parse_rate("90Gbps"), Ok(90e9));
        assert_eq!(parse_rate("100G"), Ok(100e9));
        assert_eq!(parse_rate("12.5GB/s"), Ok(100e9));
        assert_eq!(parse_rate("1MiB/s"), Ok(8.0 * 1048576.0));
        for bad in ["", "0Gb/s", "fast", "10 furlongs", "-5Gb/s"] {
            assert!(parse_rate(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_percentile("99.9"), Ok(99.9));
        assert_eq!(parse_percentile("50"), Ok(50.0));
        assert!(parse_percentile("75").is_err());
    }
}
