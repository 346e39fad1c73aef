//! Slurm's hostlist syntax (`node[01-04,07]`, `rack[1-2]-n[1-4]`, `a,b,c`) expanded into host names.
//!
//! The rules, as `scontrol show hostnames` applies them: a comma outside brackets separates
//! items; a bracket group holds comma-separated numbers and `LOW-HIGH` ranges; a range is
//! zero-padded to the number of digits of its low bound (`[08-10]` gives 08 09 10, `[9-10]`
//! gives 9 10); several groups in one item expand as a product, the last group varying
//! fastest. A suffix after the last bracket (`n[1-2]-ib`) is accepted here, although the
//! Slurm 22.05 in Debian 12 refuses it: newer releases and hand-written lists use it.

use anyhow::{Result, bail};

/// The most names one list may expand to: a typo such as `n[1-99999999]` is refused instead
/// of allocating gigabytes.
pub const MAX_HOSTS: usize = 1 << 20;

/// Expand a hostlist into its names, in order, duplicates kept (as scontrol keeps them).
pub fn expand(list: &str) -> Result<Vec<String>> {
    let list = list.trim();
    if list.is_empty() {
        bail!("the host list is empty");
    }
    let mut names = Vec::new();
    for item in split_items(list)? {
        if item.is_empty() {
            bail!("host list '{list}' has an empty item (two commas, or one at an end)");
        }
        expand_item(item, &mut names).map_err(|e| anyhow::anyhow!("host list '{list}': {e}"))?;
        if names.len() > MAX_HOSTS {
            bail!("host list '{list}' expands to more than {MAX_HOSTS} names");
        }
    }
    Ok(names)
}

/// Split at the commas that are outside brackets.
fn split_items(list: &str) -> Result<Vec<&str>> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, ch) in list.char_indices() {
        match ch {
            '[' if depth > 0 => bail!("host list '{list}' nests a '[' inside brackets"),
            '[' => depth = 1,
            ']' if depth == 0 => bail!("host list '{list}' closes a ']' it never opened"),
            ']' => depth = 0,
            ',' if depth == 0 => {
                items.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        bail!("host list '{list}' leaves a '[' unclosed");
    }
    items.push(list[start..].trim());
    Ok(items)
}

/// One item: literal text and bracket groups, expanded as a product.
fn expand_item(item: &str, out: &mut Vec<String>) -> Result<()> {
    let mut partial = vec![String::new()];
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let close = open
            + rest[open..]
                .find(']')
                .expect("split_items checked the brackets");
        let literal = &rest[..open];
        let values = group_values(&rest[open + 1..close])?;
        if partial.len().saturating_mul(values.len()) > MAX_HOSTS {
            bail!("'{item}' expands to more than {MAX_HOSTS} names");
        }
        partial = partial
            .iter()
            .flat_map(|p| values.iter().map(move |v| format!("{p}{literal}{v}")))
            .collect();
        rest = &rest[close + 1..];
    }
    if rest.contains(']') {
        bail!("'{item}' has a ']' without its '['");
    }
    out.extend(partial.into_iter().map(|p| format!("{p}{rest}")));
    Ok(())
}

/// The values of one bracket group, zero-padded as the low bounds say.
fn group_values(group: &str) -> Result<Vec<String>> {
    let mut values = Vec::new();
    for part in group.split(',') {
        let part = part.trim();
        let (low, high) = part.split_once('-').unwrap_or((part, part));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(low) || !digits(high) {
            bail!("'[{group}]' holds '{part}', which is neither a number nor a range LOW-HIGH");
        }
        let (Ok(lo), Ok(hi)) = (low.parse::<u64>(), high.parse::<u64>()) else {
            bail!("'[{group}]': the numbers in '{part}' are too large");
        };
        if hi < lo {
            bail!("'[{group}]': the range '{part}' runs backwards");
        }
        if hi - lo >= MAX_HOSTS as u64 {
            bail!("'[{group}]': the range '{part}' holds more than {MAX_HOSTS} numbers");
        }
        let width = low.len();
        values.extend((lo..=hi).map(|n| format!("{n:0width$}")));
    }
    Ok(values)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &str) -> Vec<String> {
        expand(list).unwrap_or_else(|e| panic!("{list}: {e:#}"))
    }

    #[test]
    fn ranges_lists_and_padding() {
        assert_eq!(
            names("node[01-04,07]"),
            ["node01", "node02", "node03", "node04", "node07"]
        );
        assert_eq!(names("n[9-10]"), ["n9", "n10"]);
        assert_eq!(names("n[01-3]"), ["n01", "n02", "n03"]);
        assert_eq!(names("n[008-011]"), ["n008", "n009", "n010", "n011"]);
        assert_eq!(names("r[99-101]"), ["r99", "r100", "r101"]);
        assert_eq!(names("a,b, c"), ["a", "b", "c"]);
        assert_eq!(names("fab1"), ["fab1"]);
        assert_eq!(names("n[1-2],m[3-4]"), ["n1", "n2", "m3", "m4"]);
        assert_eq!(names("10.0.0.[1-2]"), ["10.0.0.1", "10.0.0.2"]);
    }

    #[test]
    fn several_groups_expand_as_a_product_last_fastest() {
        assert_eq!(
            names("rack[1-2]-node[1-2]"),
            ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]
        );
        assert_eq!(names("x[01-02]y[1]"), ["x01y1", "x02y1"]);
    }

    #[test]
    fn a_suffix_after_the_last_bracket_is_kept() {
        assert_eq!(names("n[1-3]-ib"), ["n1-ib", "n2-ib", "n3-ib"]);
        assert_eq!(
            names("a[1-2]b[08-09]c"),
            ["a1b08c", "a1b09c", "a2b08c", "a2b09c"]
        );
    }

    #[test]
    fn malformed_lists_are_refused_with_a_reason() {
        for (bad, says) in [
            ("", "empty"),
            ("a,,b", "empty item"),
            ("n[1-3", "unclosed"),
            ("n1-3]", "never opened"),
            ("n[[1]]", "nests"),
            ("n[3-1]", "backwards"),
            ("n[a-b]", "neither a number"),
            ("n[1-]", "neither a number"),
            ("n[]", "neither a number"),
            ("n[1-99999999]", "more than"),
            ("n[1-2000]x[1-2000]", "more than"),
        ] {
            let e = format!("{:#}", expand(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// The parser against Slurm's own: `scontrol show hostnames` (it needs a slurm.conf, not
    /// a controller, so it runs offline with a minimal one). Fails, never skips, when scontrol
    /// is missing: scripts/setup installs slurm-wlm.
    #[test]
    fn agrees_with_scontrol_show_hostnames() {
        let conf =
            std::env::temp_dir().join(format!("rdmadiag-hostlist-{}.conf", std::process::id()));
        std::fs::write(
            &conf,
            "ClusterName=hostlist\nSlurmctldHost=localhost\nNodeName=localhost\n\
             PartitionName=p Nodes=localhost\n",
        )
        .unwrap();
        let cases = [
            "node[01-04,07]",
            "n[9-10]",
            "n[01-3]",
            "n[008-011]",
            "r[99-101]",
            "a,b,c",
            "n[1-2],m[3-4]",
            "rack[1-2]-node[1-2]",
            "x[01-02]y[1-3]",
            "gpu[1,3-5,10]",
            "n[0-1]",
        ];
        for list in cases {
            let out = std::process::Command::new("scontrol")
                .args(["show", "hostnames", list])
                .env("SLURM_CONF", &conf)
                .output();
            let out = match out {
                Ok(o) => o,
                Err(e) => panic!(
                    "scontrol is not runnable ({e}): install slurm-wlm (scripts/setup does) to \
                     compare the hostlist parser with Slurm's"
                ),
            };
            assert!(
                out.status.success(),
                "scontrol show hostnames {list}: {out:?}"
            );
            let slurm: Vec<String> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(str::to_string)
                .collect();
            assert_eq!(names(list), slurm, "{list}");
        }
        let _ = std::fs::remove_file(&conf);
    }
}
