//! From flagged pairs to suspects: slow hosts (worst first), groups, links, pair-level rules
//! and fabric-wide findings.

use super::*;

/// One host's scores (log ratios to the reference) and the number of figures behind each.
pub(super) struct HostScore {
    all: Option<(f64, usize)>,
    send: Option<(f64, usize)>,
    recv: Option<(f64, usize)>,
}

/// Every host's scores on its pairs with hosts not in `exclude` (on all its pairs where that
/// leaves fewer than [`MIN_FIGURES_HOST`] figures).
pub(super) fn host_scores<'a>(
    ok: &[&'a PairResult],
    exclude: &BTreeSet<&str>,
    reference: f64,
) -> BTreeMap<&'a str, HostScore> {
    type Figures = (Vec<f64>, Vec<f64>);
    let mut scores: BTreeMap<&str, [Figures; 2]> = BTreeMap::new();
    for p in ok {
        for (v, from, to) in [(p.bw_gbps, &p.a, &p.b), (p.bw_gbps_reverse, &p.b, &p.a)] {
            let Some(v) = v.filter(|v| *v > 0.0) else {
                continue;
            };
            let x = v.ln();
            let e = scores.entry(from).or_default();
            e[0].0.push(x);
            if !exclude.contains(to.as_str()) {
                e[1].0.push(x);
            }
            let e = scores.entry(to).or_default();
            e[0].1.push(x);
            if !exclude.contains(from.as_str()) {
                e[1].1.push(x);
            }
        }
    }
    scores
        .into_iter()
        .map(|(h, [everyone, fine])| {
            let (send, recv) = if fine.0.len() + fine.1.len() >= MIN_FIGURES_HOST {
                fine
            } else {
                everyone
            };
            let all: Vec<f64> = send.iter().chain(&recv).copied().collect();
            (
                h,
                HostScore {
                    all: score(all, reference),
                    send: score(send, reference),
                    recv: score(recv, reference),
                },
            )
        })
        .collect()
}

pub(super) fn score(v: Vec<f64>, reference: f64) -> Option<(f64, usize)> {
    let m = v.len();
    median(v).map(|x| ((x - reference).exp(), m))
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
    let mut out = Judgement::default();
    let ranks: BTreeMap<&str, u32> = judged
        .iter()
        .flat_map(|p| [(p.a.as_str(), p.a_rank), (p.b.as_str(), p.b_rank)])
        .collect();
    let mut named: BTreeSet<&str> = BTreeSet::new();
    let reasons: Vec<Vec<(Rule, String)>> = judged.iter().map(|p| pair_reasons(p, r, t)).collect();

    // Pair-level rules: a host with most pairs flagged, else links, else fabric-wide.
    for rule in [
        Rule::Failure,
        Rule::Counters,
        Rule::ExpectBw,
        Rule::ExpectLat,
    ] {
        let hit: Vec<usize> = (0..judged.len())
            .filter(|i| reasons[*i].iter().any(|(x, _)| *x == rule))
            .collect();
        let hit_set: BTreeSet<usize> = hit.iter().copied().collect();
        if hit.is_empty() {
            continue;
        }
        if r.hosts >= MIN_HOSTS_FOR_RATIOS && 2 * hit.len() > judged.len() {
            out.findings
                .push(fabric_wide(rule, &hit, &judged, &reasons));
            continue;
        }
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
        for (host, (n, with)) in &per_host {
            if is_host(host) && named.insert(host) {
                out.suspects.push(Suspect::Host {
                    rank: ranks[host],
                    host: host.to_string(),
                    rule,
                    reason: format!(
                        "{} of its {n} pairs flagged by {} (with {})",
                        with.len(),
                        rule.name(),
                        shorten(with, 8)
                    ),
                });
            }
        }
        for &i in &hit {
            let p = judged[i];
            if !is_host(&p.a)
                && !is_host(&p.b)
                && !named.contains(p.a.as_str())
                && !named.contains(p.b.as_str())
            {
                let why: Vec<&str> = reasons[i]
                    .iter()
                    .filter(|(x, _)| *x == rule)
                    .map(|(_, w)| w.as_str())
                    .collect();
                out.suspects.push(Suspect::Link {
                    a: (p.a_rank, p.a.clone()),
                    b: (p.b_rank, p.b.clone()),
                    rule,
                    reason: format!(
                        "{}, while {} and {} pass most of their other pairs",
                        why.join("; "),
                        p.a,
                        p.b
                    ),
                });
            }
        }
    }
    for f in counter_information(&judged, r, t) {
        out.findings.push(f);
    }

    if !r.ratios_on() {
        if r.hosts >= 2 {
            out.limits.push(format!(
                "{} hosts: the ratio rules need {MIN_HOSTS_FOR_RATIOS} (with fewer, a slow pair \
                 cannot be told from a slow host); judged by failures, counters and \
                 --expect-bw/--expect-lat only",
                r.hosts
            ));
        }
        return out;
    }
    let ok: Vec<&PairResult> = judged
        .iter()
        .copied()
        .filter(|p| p.error.is_none())
        .collect();

    // Bandwidth: hosts, directions, groups, then links.
    if let (Some(reference), Some(spread)) = (r.bw_gbps.map(f64::ln), r.bw_spread) {
        // Slow hosts, peeled worst first: each pass scores every host on its pairs with hosts
        // not yet found slow (where that leaves enough figures), so a slow host does not make
        // its partners look slow, and takes the hosts at least half as far below as the worst.
        let sig = noise_sigmas(r.hosts);
        let low_with = |s: Option<(f64, usize)>, min: usize| {
            s.is_some_and(|(x, m)| m >= min && r.bw_low(x, m, sig, t))
        };
        let mut found: BTreeSet<&str> = BTreeSet::new();
        let mut slow: Vec<(&str, Rule, String)> = Vec::new();
        for _pass in 0..16 {
            let hs = host_scores(&ok, &found, reference);
            let mut lows: Vec<(&str, Rule, f64, &HostScore)> = Vec::new();
            for (h, s) in &hs {
                if named.contains(h) || found.contains(h) {
                    continue;
                }
                let rule = match (
                    low_with(s.send, MIN_FIGURES_DIRECTION),
                    low_with(s.recv, MIN_FIGURES_DIRECTION),
                    low_with(s.all, MIN_FIGURES_HOST),
                ) {
                    (true, false, _) => Rule::BwSend,
                    (false, true, _) => Rule::BwRecv,
                    (true, true, _) | (_, _, true) => Rule::BwHost,
                    _ => continue,
                };
                let depth = [s.all, s.send, s.recv]
                    .iter()
                    .flatten()
                    .map(|(x, _)| x.ln())
                    .fold(0.0, f64::min);
                lows.push((h, rule, depth, s));
            }
            let Some(worst) = lows.iter().map(|l| l.2).reduce(f64::min) else {
                break;
            };
            for (h, rule, depth, s) in lows {
                if depth > worst / 2.0 {
                    continue;
                }
                found.insert(h);
                let fmt = |s: Option<(f64, usize)>| {
                    s.map_or("-".into(), |(x, m)| format!("{x:.2} x over {m} figures"))
                };
                let what = match rule {
                    Rule::BwSend => "sends slowly",
                    Rule::BwRecv => "receives slowly",
                    _ => "is slow both ways",
                };
                slow.push((
                    h,
                    rule,
                    format!(
                        "{what}: its median bandwidth is {} (sending {}, receiving {}) of the \
                         reference {:.3} Gb/s; below {} x and beyond the noise ({:.1} %, {sig:.1} \
                         standard errors)",
                        fmt(s.all),
                        fmt(s.send),
                        fmt(s.recv),
                        reference.exp(),
                        t.min_bw_ratio,
                        100.0 * spread
                    ),
                ));
            }
        }
        // Groups: slow hosts connected by fast pairs among themselves.
        let slow_set: BTreeSet<&str> = slow
            .iter()
            .filter(|s| s.1 == Rule::BwHost)
            .map(|s| s.0)
            .collect();
        let fast = |p: &PairResult| {
            let v = bw_figures(p);
            let m = v.len();
            median(v).is_some_and(|x| !r.bw_low(x / reference.exp(), m, sig, t))
        };
        let mut parent: BTreeMap<&str, &str> = slow_set.iter().map(|h| (*h, *h)).collect();
        fn root<'a>(parent: &BTreeMap<&'a str, &'a str>, mut h: &'a str) -> &'a str {
            while parent[h] != h {
                h = parent[h];
            }
            h
        }
        for p in ok
            .iter()
            .filter(|p| slow_set.contains(p.a.as_str()) && slow_set.contains(p.b.as_str()))
        {
            if fast(p) {
                let (ra, rb) = (root(&parent, &p.a), root(&parent, &p.b));
                if ra != rb {
                    parent.insert(ra, rb);
                }
            }
        }
        let mut candidates: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for h in &slow_set {
            candidates.entry(root(&parent, h)).or_default().push(h);
        }
        // A group stands: its pairs inside are faster than its pairs out, beyond the noise
        // (two slow hosts that are merely as slow together are two hosts, not a switch).
        let logs = |v: Vec<f64>| {
            let m = v.len();
            median(v.into_iter().filter(|x| *x > 0.0).map(f64::ln).collect()).map(|x| (x, m))
        };
        let mut grouped: BTreeSet<&str> = BTreeSet::new();
        for g in candidates.values().filter(|g| g.len() >= 2) {
            let inside: Vec<f64> = ok
                .iter()
                .filter(|p| g.contains(&p.a.as_str()) && g.contains(&p.b.as_str()))
                .flat_map(|p| bw_figures(p))
                .collect();
            let outside: Vec<f64> = ok
                .iter()
                .filter(|p| g.contains(&p.a.as_str()) != g.contains(&p.b.as_str()))
                .flat_map(|p| bw_figures(p))
                .collect();
            let (Some((xi, ni)), Some((xo, no))) = (logs(inside), logs(outside)) else {
                continue;
            };
            let gate = sig * se(spread, ni).hypot(se(spread, no));
            if xi - xo <= gate {
                continue;
            }
            grouped.extend(g.iter().copied());
            for h in g {
                named.insert(h);
            }
            out.suspects.push(Suspect::Group {
                members: g.iter().map(|h| (ranks[h], h.to_string())).collect(),
                rule: Rule::BwGroup,
                reason: format!(
                    "{} hosts are fast among themselves ({:.2} x the reference over {ni} \
                     figures) but slow to the rest ({:.2} x over {no}): a shared switch, uplink \
                     or partition, not {} separate hosts",
                    g.len(),
                    (xi - reference).exp(),
                    (xo - reference).exp(),
                    g.len()
                ),
            });
        }
        for (h, rule, reason) in slow {
            if grouped.contains(h) || !named.insert(h) {
                continue;
            }
            out.suspects.push(Suspect::Host {
                rank: ranks[h],
                host: h.to_string(),
                rule,
                reason,
            });
        }
        // Links: a slow pair between hosts that are fine.
        let lsig = noise_sigmas(ok.len());
        for p in &ok {
            if named.contains(p.a.as_str()) || named.contains(p.b.as_str()) {
                continue;
            }
            let v = bw_figures(p);
            let Some(mean) = (!v.is_empty())
                .then(|| (v.iter().map(|x| x.ln()).sum::<f64>() / v.len() as f64).exp())
            else {
                continue;
            };
            let reason = r.bw_low(mean / reference.exp(), v.len(), lsig, t).then(|| {
                format!(
                    "the pair's bandwidth is {:.2} x the reference {:.3} Gb/s ({} Gb/s), while \
                     {} and {} are fine with their other pairs",
                    mean / reference.exp(),
                    reference.exp(),
                    v.iter()
                        .map(|x| format!("{x:.3}"))
                        .collect::<Vec<_>>()
                        .join(" and "),
                    p.a,
                    p.b
                )
            });
            if let Some(reason) = reason {
                out.suspects.push(Suspect::Link {
                    a: (p.a_rank, p.a.clone()),
                    b: (p.b_rank, p.b.clone()),
                    rule: Rule::BwLink,
                    reason,
                });
            }
        }
    } else if r.bw_figures > 0 {
        out.limits
            .push("bandwidth: too few figures for a noise estimate; not judged by ratio".into());
    }

    // Latency: hosts, then links.
    if let (Some(reference), Some(spread)) = (r.lat_us.map(f64::ln), r.lat_spread) {
        let per = per_host_logs(&ok, lat_figures);
        let sig = noise_sigmas(per.len());
        for (h, v) in &per {
            if named.contains(h) {
                continue;
            }
            if let Some((x, m)) = score(v.clone(), reference)
                && m >= MIN_FIGURES_DIRECTION
                && r.lat_high(x, m, sig, t)
            {
                named.insert(h);
                out.suspects.push(Suspect::Host {
                    rank: ranks[h],
                    host: h.to_string(),
                    rule: Rule::LatHost,
                    reason: format!(
                        "its median latency is {x:.2} x the reference {:.1} us over {m} \
                         pairs; above {} x and beyond the noise ({:.0} %, {sig:.1} standard \
                         errors)",
                        reference.exp(),
                        t.max_lat_ratio,
                        100.0 * spread
                    ),
                });
            }
        }
        let lsig = noise_sigmas(ok.len());
        for p in &ok {
            if named.contains(p.a.as_str()) || named.contains(p.b.as_str()) {
                continue;
            }
            let Some(x) = p.lat_us.map(|v| v / reference.exp()) else {
                continue;
            };
            if r.lat_high(x, 1, lsig, t) {
                out.suspects.push(Suspect::Link {
                    a: (p.a_rank, p.a.clone()),
                    b: (p.b_rank, p.b.clone()),
                    rule: Rule::LatLink,
                    reason: format!(
                        "the pair's latency is {x:.2} x the reference {:.1} us, while {} and {} \
                         are fine with their other pairs",
                        reference.exp(),
                        p.a,
                        p.b
                    ),
                });
            }
        }
    }
    out
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
        rule: rule.name().into(),
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
        rule: "counters".into(),
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
