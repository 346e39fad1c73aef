//! Slurm's hostlist syntax (`node[01-04,07]`, `rack[1-2]-n[1-4]`, `a,b,c`) expanded into host names.
//!
//! The rules, as `scontrol show hostnames` applies them: a comma outside brackets separates
//! items; a bracket group holds comma-separated numbers and `LOW-HIGH` ranges; a range is
//! zero-padded to the number of digits of its low bound (`[08-10]` gives 08 09 10, `[9-10]`
//! gives 9 10); several groups in one item expand as a product, the last group varying
//! fastest. A suffix after the last bracket (`n[1-2]-ib`) is accepted here, although the
//! Slurm 22.05 in Debian 12 refuses it: newer releases and hand-written lists use it.

use anyhow::{Result, bail};

/// The most names one list may expand to (and the most ranks a run takes): a typo such as
/// `n[1-99999999]` is refused before anything is allocated for it, however the ranges combine.
pub const MAX_HOSTS: usize = 1 << 16;

/// The longest host name (a DNS name has at most 253 characters).
const MAX_NAME_LEN: usize = 255;

/// Expand a hostlist into its names, in order, duplicates kept (as scontrol keeps them). The
/// number of names is counted before any is made, so a list's memory is bounded by
/// [`MAX_HOSTS`] names whatever it holds.
pub fn expand(list: &str) -> Result<Vec<String>> {
    let list = list.trim();
    if list.is_empty() {
        bail!("the host list is empty");
    }
    let shown = shorten(list);
    let mut items = Vec::new();
    let mut total = 0usize;
    for item in split_items(list).map_err(|e| anyhow::anyhow!("host list '{shown}' {e}"))? {
        if item.is_empty() {
            bail!("host list '{shown}' has an empty item (two commas, or one at an end)");
        }
        let parsed = parse_item(item).map_err(|e| anyhow::anyhow!("host list '{shown}': {e}"))?;
        if parsed.longest_name() > MAX_NAME_LEN {
            bail!(
                "host list '{shown}' makes names longer than {MAX_NAME_LEN} characters, the \
                 longest a host name has"
            );
        }
        total = total.saturating_add(parsed.count());
        if total > MAX_HOSTS {
            bail!("host list '{shown}' expands to more than {MAX_HOSTS} names");
        }
        items.push(parsed);
    }
    let mut names = Vec::with_capacity(total);
    for item in &items {
        item.expand_into(&mut names);
    }
    Ok(names)
}

/// A list (or a part of it) as an error message shows it: at most 40 characters.
fn shorten(list: &str) -> String {
    match list.char_indices().nth(40) {
        Some((i, _)) => format!("{}... ({} characters)", &list[..i], list.len()),
        None => list.to_string(),
    }
}

/// Split at the commas that are outside brackets.
fn split_items(list: &str) -> Result<Vec<&str>> {
    let (mut items, mut depth, mut start) = (Vec::new(), 0usize, 0);
    for (i, ch) in list.char_indices() {
        match ch {
            '[' if depth > 0 => bail!("nests a '[' inside brackets"),
            '[' => depth = 1,
            ']' if depth == 0 => bail!("closes a ']' it never opened"),
            ']' => depth = 0,
            ',' if depth == 0 => {
                items.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth > 0 {
        bail!("leaves a '[' unclosed");
    }
    items.push(list[start..].trim());
    Ok(items)
}

/// One `LOW-HIGH` range of a bracket group (a single number is LOW = HIGH), zero-padded to
/// `width` digits.
struct Range {
    low: u64,
    high: u64,
    width: usize,
}

/// One item parsed: literal text before each bracket group, the groups, and the suffix.
struct Item<'a> {
    groups: Vec<(&'a str, Vec<Range>)>,
    suffix: &'a str,
}

impl Item<'_> {
    /// The length of its longest name.
    fn longest_name(&self) -> usize {
        self.groups
            .iter()
            .map(|(literal, ranges)| {
                let digits = ranges
                    .iter()
                    .map(|r| r.width.max(r.high.to_string().len()))
                    .max()
                    .unwrap_or(0);
                literal.len() + digits
            })
            .sum::<usize>()
            + self.suffix.len()
    }

    /// How many names the item makes (saturating: compared against [`MAX_HOSTS`] only).
    fn count(&self) -> usize {
        self.groups.iter().fold(1usize, |n, (_, ranges)| {
            n.saturating_mul(ranges.iter().fold(0usize, |c, r| {
                c.saturating_add(usize::try_from(r.high - r.low).unwrap_or(usize::MAX))
                    .saturating_add(1)
            }))
        })
    }

    /// Append its names, the last group varying fastest.
    fn expand_into(&self, out: &mut Vec<String>) {
        let mut partial = vec![String::new()];
        for (literal, ranges) in &self.groups {
            partial = partial
                .iter()
                .flat_map(|p| {
                    ranges.iter().flat_map(move |r| {
                        let width = r.width;
                        (r.low..=r.high).map(move |n| format!("{p}{literal}{n:0width$}"))
                    })
                })
                .collect();
        }
        out.extend(partial.into_iter().map(|p| format!("{p}{}", self.suffix)));
    }
}

/// One item: literal text and bracket groups (the brackets were checked by `split_items`).
fn parse_item(item: &str) -> Result<Item<'_>> {
    let shown = shorten(item);
    let mut groups = Vec::new();
    let mut rest = item;
    while let Some(open) = rest.find('[') {
        let Some(len) = rest[open..].find(']') else {
            bail!("'{shown}' leaves a '[' unclosed");
        };
        let close = open + len;
        groups.push((&rest[..open], parse_group(&rest[open + 1..close])?));
        rest = &rest[close + 1..];
    }
    if rest.contains(']') {
        bail!("'{shown}' has a ']' without its '['");
    }
    Ok(Item {
        groups,
        suffix: rest,
    })
}

/// The ranges of one bracket group, zero-padded as the low bounds say.
fn parse_group(group: &str) -> Result<Vec<Range>> {
    let g = shorten(group);
    let mut ranges = Vec::new();
    let mut count = 0u64;
    for part in group.split(',') {
        let part = part.trim();
        let pt = shorten(part);
        let (low, high) = part.split_once('-').unwrap_or((part, part));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(low) || !digits(high) {
            bail!("'[{g}]' holds '{pt}', which is neither a number nor a range LOW-HIGH");
        }
        let (Ok(lo), Ok(hi)) = (low.parse::<u64>(), high.parse::<u64>()) else {
            bail!("'[{g}]': the numbers in '{pt}' are too large");
        };
        if hi < lo {
            bail!("'[{g}]': the range '{pt}' runs backwards");
        }
        count = count.saturating_add(hi - lo).saturating_add(1);
        if count > MAX_HOSTS as u64 {
            bail!("'[{g}]' holds more than {MAX_HOSTS} numbers");
        }
        ranges.push(Range {
            low: lo,
            high: hi,
            width: low.len(),
        });
    }
    Ok(ranges)
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
            ("n[1-65536],m[1]", "more than 65536 names"),
            ("n[1-40000,1-40000]", "more than 65536 numbers"),
            (
                format!("n[{}1-2]", "0".repeat(300)).as_str(),
                "longer than 255",
            ),
            ("x".repeat(256).as_str(), "longer than 255"),
        ] {
            let e = format!("{:#}", expand(bad).unwrap_err());
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    /// Lists that once allocated gigabytes before they were refused (16 ranges of a million in
    /// 162 characters; 64 of them): refused by counting, at once; the largest list allowed
    /// still expands.
    #[test]
    fn huge_lists_are_refused_before_anything_is_allocated() {
        let group = vec!["1-999999"; 64].join(",");
        for list in [format!("n[{group}]"), format!("a[1-9999]b[{group}]c")] {
            let started = std::time::Instant::now();
            let e = format!("{:#}", expand(&list).unwrap_err());
            assert!(e.contains("more than 65536"), "{e}");
            assert!(e.len() < 300, "the message shows the list shortened: {e}");
            assert!(started.elapsed() < std::time::Duration::from_secs(1));
        }
        let all = expand(&format!("n[1-{MAX_HOSTS}]")).unwrap();
        assert_eq!(all.len(), MAX_HOSTS);
        assert_eq!(all[MAX_HOSTS - 1], format!("n{MAX_HOSTS}"));
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
