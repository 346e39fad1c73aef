//! From flagged pairs to suspects: every rule its own function, each fed the same judged
//! pairs, reference and thresholds ([`Ctx`]) and returning its charges; [`classify`] runs them
//! in order and makes the charges against one host, link or group one suspect.

use super::*;

/// What every rule is fed.
pub(super) struct Ctx<'a> {
    /// The scheduled pairs with no missing rank.
    pub judged: Vec<&'a PairResult>,
    /// Those of them with no failed test.
    pub ok: Vec<&'a PairResult>,
    /// Each pair of `judged`'s rule-by-rule reasons.
    pub reasons: Vec<Vec<(Rule, String)>>,
    pub ranks: BTreeMap<&'a str, u32>,
    pub r: &'a Reference,
    pub t: &'a Thresholds,
}

impl Ctx<'_> {
    pub fn host(&self, h: &str) -> Target {
        Target::Host {
            rank: self.ranks[h],
            host: h.to_string(),
        }
    }

    pub fn link(&self, p: &PairResult) -> Target {
        Target::Link {
            a: (p.a_rank, p.a.clone()),
            b: (p.b_rank, p.b.clone()),
        }
    }
}

/// Find the suspects and fabric-wide findings among the scheduled pairs (flagged already).
/// `missing`: host names of ranks that did not finish.
pub fn classify(
    pairs: &[PairResult],
    missing: &BTreeSet<String>,
    r: &Reference,
    t: &Thresholds,
) -> Judgement {
    let judged = judged(pairs, missing);
    let ok: Vec<&PairResult> = judged
        .iter()
        .copied()
        .filter(|p| p.error.is_none())
        .collect();
    let ctx = Ctx {
        ranks: judged
            .iter()
            .flat_map(|p| [(p.a.as_str(), p.a_rank), (p.b.as_str(), p.b_rank)])
            .collect(),
        reasons: judged.iter().map(|p| pair_reasons(p, r, t)).collect(),
        judged,
        ok,
        r,
        t,
    };
    let mut out = Judgement::default();
    let mut charges: Vec<(Target, Charge)> = Vec::new();
    let mut named: BTreeSet<String> = BTreeSet::new();
    for rule in [
        Rule::Failure,
        Rule::Counters,
        Rule::ExpectBw,
        Rule::ExpectLat,
    ] {
        let (found, finding) = pair_rule(&ctx, rule, &mut named);
        charges.extend(found);
        out.findings.extend(finding);
    }
    out.findings.extend(counter_information(&ctx.judged, r, t));
    if !r.ratios_on() {
        if r.hosts >= 2 {
            out.limits.push(format!(
                "{} hosts: the ratio rules need {MIN_HOSTS_FOR_RATIOS} (with fewer, a slow pair \
                 cannot be told from a slow host); judged by failures, counters and \
                 --expect-bw/--expect-lat only",
                r.hosts
            ));
        }
        out.suspects = merge(charges);
        return out;
    }
    // Bandwidth: hosts, groups, then links between hosts not found slow.
    let mut slow: BTreeSet<String> = BTreeSet::new();
    if r.bw_gbps.is_some() && r.bw_spread.is_some() {
        let hosts = bandwidth::hosts(&ctx);
        let (groups, grouped) = bandwidth::groups(&ctx, &hosts);
        charges.extend(groups);
        for (target, charge) in hosts {
            if let Target::Host { host, .. } = &target {
                slow.insert(host.clone());
                if !grouped.contains(host) {
                    charges.push((target, charge));
                }
            }
        }
        slow.extend(grouped);
        let (links, mut held) = bandwidth::links(&ctx, &slow);
        // A pair-level charge (counters, a failure) on a link with a slow host at one end is
        // the host's doing (a slow NIC's queue drops make retransmits): held with the rest.
        let (on_slow, elsewhere): (bandwidth::Charges, bandwidth::Charges) =
            charges.into_iter().partition(|(target, _)| match target {
                Target::Link { a, b } => slow.contains(&a.1) || slow.contains(&b.1),
                _ => false,
            });
        charges = elsewhere;
        held.extend(on_slow);
        charges.extend(links);
        out.held = merge(held);
    } else if r.bw_figures > 0 {
        out.limits
            .push("bandwidth: too few figures for a noise estimate; not judged by ratio".into());
    }
    // Latency: hosts, then links between hosts found neither slow nor late.
    if r.lat_us.is_some() && r.lat_spread.is_some() {
        let hosts = latency::hosts(&ctx);
        let mut late = slow.clone();
        for (target, _) in &hosts {
            if let Target::Host { host, .. } = target {
                late.insert(host.clone());
            }
        }
        charges.extend(hosts);
        charges.extend(latency::links(&ctx, &late));
    }
    out.suspects = merge(charges);
    out
}

/// A pair-level rule (failure, counters, expect-bw, expect-lat): a host with most of its pairs
/// (two or more) flagged by it, a lone flagged pair between other hosts a link, or, when it
/// flags most pairs (4 hosts or more), one fabric-wide finding. `named`: hosts these rules
/// named already (their pairs make no link).
pub(super) fn pair_rule(
    ctx: &Ctx,
    rule: Rule,
    named: &mut BTreeSet<String>,
) -> (Vec<(Target, Charge)>, Option<Finding>) {
    let judged = &ctx.judged;
    let hit: Vec<usize> = (0..judged.len())
        .filter(|i| ctx.reasons[*i].iter().any(|(x, _)| *x == rule))
        .collect();
    if hit.is_empty() {
        return (Vec::new(), None);
    }
    if ctx.r.hosts >= MIN_HOSTS_FOR_RATIOS && 2 * hit.len() > judged.len() {
        return (
            Vec::new(),
            Some(fabric_wide(rule, &hit, judged, &ctx.reasons)),
        );
    }
    let hit_set: BTreeSet<usize> = hit.iter().copied().collect();
    let mut per_host: BTreeMap<&str, (usize, Vec<&str>)> = BTreeMap::new();
    for (i, p) in judged.iter().enumerate() {
        for (me, other) in [(p.a.as_str(), p.b.as_str()), (p.b.as_str(), p.a.as_str())] {
            let e = per_host.entry(me).or_default();
            e.0 += 1;
            if hit_set.contains(&i) {
                e.1.push(other);
            }
        }
    }
    let is_host = |h: &str| {
        per_host
            .get(h)
            .is_some_and(|(n, f)| *n >= 2 && 2 * f.len() > *n)
    };
    let mut out = Vec::new();
    for (host, (n, with)) in &per_host {
        if is_host(host) {
            named.insert(host.to_string());
            out.push((
                ctx.host(host),
                Charge::new(
                    rule,
                    format!(
                        "{} of its {n} pairs flagged by {rule} (with {})",
                        with.len(),
                        shorten(with, 8)
                    ),
                ),
            ));
        }
    }
    for &i in &hit {
        let p = judged[i];
        if is_host(&p.a) || is_host(&p.b) || named.contains(&p.a) || named.contains(&p.b) {
            continue;
        }
        let why: Vec<&str> = ctx.reasons[i]
            .iter()
            .filter(|(x, _)| *x == rule)
            .map(|(_, w)| w.as_str())
            .collect();
        out.push((
            ctx.link(p),
            Charge::new(
                rule,
                format!(
                    "{}, while {} and {} pass most of their other pairs",
                    why.join("; "),
                    p.a,
                    p.b
                ),
            ),
        ));
    }
    (out, None)
}

/// At most `n` names, then "and K more".
pub(super) fn shorten(names: &[&str], n: usize) -> String {
    if names.len() <= n {
        names.join(", ")
    } else {
        format!("{} and {} more", names[..n].join(", "), names.len() - n)
    }
}

/// One finding for a rule that flags most pairs.
pub(super) fn fabric_wide(
    rule: Rule,
    hit: &[usize],
    judged: &[&PairResult],
    reasons: &[Vec<(Rule, String)>],
) -> Finding {
    let first = reasons[hit[0]]
        .iter()
        .find(|(x, _)| *x == rule)
        .map_or("", |w| w.1.as_str());
    Finding {
        rule,
        fails: true,
        pairs: hit.len() as u32,
        text: format!(
            "{} of {} pairs flagged by {} (e.g. {} - {}: {first}): a fabric-wide condition, no \
             single host stands out",
            hit.len(),
            judged.len(),
            rule.name(),
            judged[hit[0]].a,
            judged[hit[0]].b
        ),
    }
}

/// Counters that rose on half the pairs or more: one line of information each group.
pub(super) fn counter_information(
    judged: &[&PairResult],
    r: &Reference,
    t: &Thresholds,
) -> Vec<Finding> {
    if judged.is_empty() {
        return Vec::new();
    }
    let mut rose: BTreeMap<String, (u32, u64, u64)> = BTreeMap::new();
    for p in judged {
        for (c, d) in counter_totals(p) {
            let e = rose.entry(c.to_string()).or_insert((0, u64::MAX, 0));
            e.0 += 1;
            e.1 = e.1.min(d);
            e.2 = e.2.max(d);
        }
    }
    let wide: Vec<(String, (u32, u64, u64))> = rose
        .into_iter()
        .filter(|(_, (n, ..))| 2 * *n as usize >= judged.len())
        .collect();
    if wide.is_empty() {
        return Vec::new();
    }
    let most = wide.iter().map(|w| w.1.0).max().unwrap_or(0);
    let list: Vec<String> = wide
        .iter()
        .map(|(c, (_, lo, hi))| {
            format!(
                "{c} +{lo}..+{hi} (fence {})",
                r.counter_fence.get(c).copied().unwrap_or(0)
            )
        })
        .collect();
    vec![Finding {
        rule: Rule::Counters,
        fails: false,
        pairs: most,
        text: format!(
            "error counters rose on {most} of {} pairs: {}; a fabric-wide condition (judged \
             against the run's own pairs{}), no single host stands out",
            judged.len(),
            list.join(", "),
            if t.counters {
                ""
            } else {
                "; not judged: --no-counter-check"
            }
        ),
    }]
}
