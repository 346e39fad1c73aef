//! Parsing of sizes ("4K" = 4096), durations ("10s", "10"), rates and MTUs on the command line.

use std::time::Duration;

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

/// The longest duration any flag takes (a timeout, a wait, a test's length): 30 days. Longer is a
/// typo, and every deadline computed from it (a few waits, a round of them) stays far from the
/// clock's limit.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);

/// A non-zero duration: a bare number is seconds (perftest's `-D 10`), else humantime form:
/// 10s, 500ms, 2m. At most [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    match t.parse::<u64>() {
        Ok(secs) => within_bounds(s, Duration::from_secs(secs)),
        Err(_) => parse_duration_with_unit(t),
    }
}

fn within_bounds(s: &str, d: Duration) -> Result<Duration, String> {
    if d.is_zero() {
        return Err("a duration must be longer than zero".into());
    }
    if d > MAX_DURATION {
        return Err(format!(
            "'{}' is longer than 30 days, the longest wait taken",
            s.trim()
        ));
    }
    Ok(d)
}

/// A non-zero duration that names its unit (5us, 1ms, 2s): for thresholds, where a bare number
/// could mean seconds or microseconds and a wrong guess would always pass.
pub fn parse_duration_with_unit(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "'{s}' has no unit: write e.g. {t}us, {t}ms or {t}s"
        ));
    }
    let d = humantime::parse_duration(t)
        .map_err(|e| format!("'{s}' is not a duration ({e}; examples: 10s, 500ms, 2m)"))?;
    within_bounds(s, d)
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

/// A RoCE traffic class (the IP TOS byte): 0-255, decimal or 0x hex (104 = 0x68, DSCP 26).
pub fn parse_tclass(s: &str) -> Result<u8, String> {
    let t = s.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => t.parse::<u32>(),
    };
    v.ok().and_then(|v| u8::try_from(v).ok()).ok_or_else(|| {
        format!(
            "'{s}' is not a traffic class: 0-255 (or 0x00-0xff); the DSCP is its top 6 \
                 bits, so DSCP 26 is 104"
        )
    })
}

/// A positive number and what follows it ("90Gb/s" -> (90, "Gb/s")).
fn number_and_unit<'a>(s: &str, t: &'a str, examples: &str) -> Result<(f64, &'a str), String> {
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a rate (examples: {examples})"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err("a rate must be greater than zero".into());
    }
    Ok((n, unit.trim()))
}

/// A data rate in bits per second, its unit required: 90Gb/s, 90Gbps, 100G (bits), 5000MiB/s,
/// 12.5GB/s (bytes). A bare number is refused: `--expect-bw 90` would mean 90 bit/s and pass.
pub fn parse_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (n, unit) = number_and_unit(s, t, "90Gb/s, 5000MiB/s")?;
    let unit = unit.trim_end_matches("/s").trim_end_matches("ps");
    let mult = match unit {
        "" => {
            return Err(format!(
                "'{s}' has no unit: write e.g. {t}Gb/s (bits), {t}GB/s or {t}MiB/s (bytes)"
            ));
        }
        "b" => 1.0,
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

/// A data rate in Gb/s when bare (perftest's `-w 90`), else as [`parse_rate`].
pub fn parse_rate_gbits(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n * 1e9),
        Ok(_) => Err("a rate must be greater than zero".into()),
        Err(_) => parse_rate(s),
    }
}

/// A message rate in messages per second, its unit required: 10Mpps, 500kpps, 2000pps (also
/// Mmsg/s, kmsg/s, msg/s).
pub fn parse_msg_rate(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (n, unit) = number_and_unit(s, t, "10Mpps, 500kpps")?;
    let mult = match unit {
        "" => return Err(format!("'{s}' has no unit: write e.g. {t}Mpps or {t}kpps")),
        "pps" | "msg/s" => 1.0,
        "kpps" | "Kpps" | "kmsg/s" => 1e3,
        "Mpps" | "Mmsg/s" => 1e6,
        "Gpps" => 1e9,
        _ => return Err(format!("'{s}': unknown unit (use Mpps, kpps or pps)")),
    };
    Ok(n * mult)
}

/// A message rate in millions per second when bare (perftest's `-y 10`), else as
/// [`parse_msg_rate`].
pub fn parse_msg_rate_mpps(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(n) if n.is_finite() && n > 0.0 => Ok(n * 1e6),
        Ok(_) => Err("a rate must be greater than zero".into()),
        Err(_) => parse_msg_rate(s),
    }
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
    fn traffic_classes_are_a_byte_in_decimal_or_hex() {
        assert_eq!(parse_tclass("0"), Ok(0));
        assert_eq!(parse_tclass("104"), Ok(104));
        assert_eq!(parse_tclass("0x68"), Ok(104));
        assert_eq!(parse_tclass("0XFF"), Ok(255));
        assert_eq!(parse_tclass("255"), Ok(255));
        for bad in ["256", "-1", "0x100", "", "ef", "1.5"] {
            let e = parse_tclass(bad).unwrap_err();
            assert!(e.contains("0-255") && e.contains("DSCP"), "{bad}: {e}");
        }
    }

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
        assert_eq!(
            parse_duration("10"),
            Ok(Duration::from_secs(10)),
            "perftest's -D 10"
        );
        assert_eq!(parse_duration(" 2 "), Ok(Duration::from_secs(2)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("1.5").is_err());
        let e = parse_duration_with_unit("5").unwrap_err();
        assert!(e.contains("5us") && e.contains("no unit"), "{e}");
        assert_eq!(
            parse_duration_with_unit("5us"),
            Ok(Duration::from_micros(5))
        );
        assert!(parse_duration("soon").is_err());
        assert_eq!(parse_duration("30d"), Ok(MAX_DURATION));
        for huge in [
            "2592001",
            "31d",
            "2049638230412172402s",
            "18446744073709551615",
        ] {
            let e = parse_duration(huge).unwrap_err();
            assert!(e.contains("30 days"), "{huge}: {e}");
        }
        assert!(parse_duration_with_unit("18446744073709551615s").is_err());
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
        for bad in ["", "0Gb/s", "fast", "10 furlongs", "-5Gb/s", "90"] {
            assert!(parse_rate(bad).is_err(), "{bad:?}");
        }
        let e = parse_rate("90").unwrap_err();
        for unit in ["90Gb/s", "90GB/s", "90MiB/s"] {
            assert!(e.contains(unit), "{e} names {unit}");
        }
        assert_eq!(parse_rate_gbits("90"), Ok(90e9), "perftest's -w is Gb/s");
        assert_eq!(parse_rate_gbits("1MiB/s"), Ok(8.0 * 1048576.0));
        assert!(parse_rate_gbits("0").is_err());
        assert_eq!(parse_msg_rate("10Mpps"), Ok(10e6));
        assert_eq!(parse_msg_rate("500kpps"), Ok(500e3));
        assert_eq!(parse_msg_rate("2000pps"), Ok(2000.0));
        assert!(parse_msg_rate("10").unwrap_err().contains("10Mpps"));
        assert!(parse_msg_rate("10Gb/s").is_err());
        assert_eq!(
            parse_msg_rate_mpps("2.5"),
            Ok(2.5e6),
            "perftest's -y is Mpps"
        );
        assert_eq!(parse_percentile("99.9"), Ok(99.9));
        assert_eq!(parse_percentile("50"), Ok(50.0));
        assert!(parse_percentile("75").is_err());
    }
}
