//! From flagged pairs to suspects: every rule its own function, each fed the same judged
//! pairs, reference and thresholds ([`Ctx`]) and returning its charges; [`classify`] runs them
//! in order and makes the charges against one host, link or group one suspect.

use super::*;

/// What every rule is fed.
pub(super) struct Ctx<'a> {
    /// The judged pairs (scheduled, no missing rank), lean.
    pub s: &'a Sheet,
    /// Which rules flag each of them.
    pub rules: Vec<Rules>,
    pub r: &'a Reference,
    pub t: &'a Thresholds,
}

impl Ctx<'_> {
    /// The judged pairs with no failed test, with their place.
    pub fn ok(&self) -> impl Iterator<Item = (usize, &Fig)> {
        self.s.ok()
    }

    pub fn host(&self, h: Ix) -> Target {
        Target::Host {
            rank: self.s.rank(h),
            host: self.s.name(h).to_string(),
        }
    }

    pub fn link(&self, p: &Fig) -> Target {
        Target::Link {
            a: (self.s.rank(p.a), self.s.name(p.a).to_string()),
            b: (self.s.rank(p.b), self.s.name(p.b).to_string()),
        }
    }

    /// Pair `i`'s rule-by-rule reasons, in words.
    pub fn reasons(&self, i: usize) -> Vec<(Rule, String)> {
        pair_reasons(&self.s.pair(i), self.r, self.t)
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
    classify_sheet(&Sheet::of(pairs, missing), r, t)
}

/// [`classify`] on a sheet's pairs.
pub fn classify_sheet(s: &Sheet, r: &Reference, t: &Thresholds) -> Judgement {
    let fences = r.fences(s);
    let ctx = Ctx {
        rules: (0..s.figs().len())
            .map(|i| pair_rules(s, i, &fences, r, t))
            .collect(),
        s,
        r,
        t,
    };
    let mut out = Judgement::default();
    let mut charges: Vec<(Target, Charge)> = Vec::new();
    let mut named: BTreeSet<Ix> = BTreeSet::new();
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
    out.findings.extend(counter_information(s, r, t));
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
    let mut slow = vec![false; s.hosts()];
    if r.bw_gbps.is_some() && r.bw_spread.is_some() {
        let hosts = bandwidth::hosts(&ctx);
        let (groups, grouped) = bandwidth::groups(&ctx, &hosts);
        charges.extend(groups);
        for (h, charge) in hosts {
            slow[h as usize] = true;
            if !grouped.contains(&h) {
                charges.push((ctx.host(h), charge));
            }
        }
        for h in grouped {
            slow[h as usize] = true;
        }
        let (links, mut held) = bandwidth::links(&ctx, &slow);
        // A pair-level charge (counters, a failure) on a link with a slow host at one end is
        // the host's doing (a slow NIC's queue drops make retransmits): held with the rest.
        let is_slow = |h: &(u32, String)| s.find(&h.1).is_some_and(|h| slow[h as usize]);
        let (on_slow, elsewhere): (bandwidth::Charges, bandwidth::Charges) =
            charges.into_iter().partition(|(target, _)| match target {
                Target::Link { a, b } => is_slow(a) || is_slow(b),
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
        for (h, _) in &hosts {
            late[*h as usize] = true;
        }
        charges.extend(hosts.into_iter().map(|(h, c)| (ctx.host(h), c)));
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
    named: &mut BTreeSet<Ix>,
) -> (Vec<(Target, Charge)>, Option<Finding>) {
    let s = ctx.s;
    let figs = s.figs();
    let hit: Vec<usize> = (0..figs.len())
        .filter(|i| ctx.rules[*i].has(rule))
        .collect();
    if hit.is_empty() {
        return (Vec::new(), None);
    }
    if ctx.r.hosts >= MIN_HOSTS_FOR_RATIOS && 2 * hit.len() > figs.len() {
        return (Vec::new(), Some(fabric_wide(ctx, rule, &hit)));
    }
    // Per host: its pairs, and the hosts of those flagged.
    let mut per_host: Vec<(usize, Vec<Ix>)> = vec![(0, Vec::new()); s.hosts()];
    for (i, p) in figs.iter().enumerate() {
        for (me, other) in [(p.a, p.b), (p.b, p.a)] {
            let e = &mut per_host[me as usize];
            e.0 += 1;
            if ctx.rules[i].has(rule) {
                e.1.push(other);
            }
        }
    }
    let is_host = |h: Ix| {
        let (n, f) = &per_host[h as usize];
        *n >= 2 && 2 * f.len() > *n
    };
    let mut out = Vec::new();
    for (h, (n, with)) in per_host.iter().enumerate() {
        let h = h as Ix;
        if is_host(h) {
            named.insert(h);
            let with: Vec<&str> = with.iter().map(|x| s.name(*x)).collect();
            out.push((
                ctx.host(h),
                Charge::new(
                    rule,
                    format!(
                        "{} of its {n} pairs flagged by {rule} (with {})",
                        with.len(),
                        shorten(&with, 8)
                    ),
                ),
            ));
        }
    }
    for &i in &hit {
        let p = &figs[i];
        if is_host(p.a) || is_host(p.b) || named.contains(&p.a) || named.contains(&p.b) {
            continue;
        }
        let reasons = ctx.reasons(i);
        let why: Vec<&str> = reasons
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
                    s.name(p.a),
                    s.name(p.b)
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
pub(super) fn fabric_wide(ctx: &Ctx, rule: Rule, hit: &[usize]) -> Finding {
    let reasons = ctx.reasons(hit[0]);
    let first = reasons
        .iter()
        .find(|(x, _)| *x == rule)
        .map_or("", |w| w.1.as_str());
    let p = &ctx.s.figs()[hit[0]];
    Finding {
        rule,
        fails: true,
        pairs: hit.len() as u32,
        text: format!(
            "{} of {} pairs flagged by {} (e.g. {} - {}: {first}): a fabric-wide condition, no \
             single host stands out",
            hit.len(),
            ctx.s.figs().len(),
            rule.name(),
            ctx.s.name(p.a),
            ctx.s.name(p.b)
        ),
    }
}

/// Counters that rose on half the pairs or more: one line of information each group.
pub(super) fn counter_information(s: &Sheet, r: &Reference, t: &Thresholds) -> Vec<Finding> {
    let judged = s.figs().len();
    if judged == 0 {
        return Vec::new();
    }
    let names = s.counter_names();
    let mut rose: Vec<Option<(u32, u64, u64)>> = vec![None; names.len()];
    for i in 0..judged {
        for (c, d) in s.totals(i) {
            let e = rose[c as usize].get_or_insert((0, u64::MAX, 0));
            e.0 += 1;
            e.1 = e.1.min(d);
            e.2 = e.2.max(d);
        }
    }
    let mut wide: Vec<(&String, (u32, u64, u64))> = names
        .iter()
        .zip(rose)
        .filter_map(|(c, x)| x.map(|x| (c, x)))
        .filter(|(_, (n, ..))| 2 * *n as usize >= judged)
        .collect();
    wide.sort_by(|x, y| x.0.cmp(y.0));
    if wide.is_empty() {
        return Vec::new();
    }
    let most = wide.iter().map(|w| w.1.0).max().unwrap_or(0);
    let list: Vec<String> = wide
        .iter()
        .map(|(c, (_, lo, hi))| {
            format!(
                "{c} +{lo}..+{hi} (fence {})",
                r.counter_fence.get(c.as_str()).copied().unwrap_or(0)
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
            judged,
            list.join(", "),
            if t.counters {
                ""
            } else {
                "; not judged: --no-counter-check"
            }
        ),
    }]
}
