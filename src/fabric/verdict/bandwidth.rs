//! The bandwidth rules: slow hosts (worst first, and which way), groups of hosts behind one
//! switch, and slow links, each direction judged on its own.

use super::*;

/// Charges, each against its host, link or group.
pub(super) type Charges = Vec<(Target, Charge)>;

/// One host's scores (ratios to the reference) and the number of figures behind each.
pub(super) struct HostScore {
    all: Option<(f64, usize)>,
    send: Option<(f64, usize)>,
    recv: Option<(f64, usize)>,
}

/// One host's log figures: sent and received, to hosts not excluded and to those excluded.
#[derive(Default, Clone)]
struct Logs {
    send: [Vec<f64>; 2],
    recv: [Vec<f64>; 2],
}

/// Every host's scores on its pairs with hosts not in `exclude` (on all its pairs where that
/// leaves fewer than [`MIN_FIGURES_HOST`] figures), by index (None: no figure).
pub(super) fn host_scores(ctx: &Ctx, exclude: &[bool], reference: f64) -> Vec<Option<HostScore>> {
    let mut logs: Vec<Option<Logs>> = vec![None; ctx.s.hosts()];
    for (_, p) in ctx.ok() {
        for (v, from, to) in [(p.bw(), p.a, p.b), (p.bw_reverse(), p.b, p.a)] {
            let Some(v) = v.filter(|v| *v > 0.0) else {
                continue;
            };
            let x = v.ln();
            let e = logs[from as usize].get_or_insert_with(Logs::default);
            e.send[exclude[to as usize] as usize].push(x);
            let e = logs[to as usize].get_or_insert_with(Logs::default);
            e.recv[exclude[from as usize] as usize].push(x);
        }
    }
    logs.into_iter()
        .map(|l| {
            let Logs {
                send: [mut send, send_out],
                recv: [mut recv, recv_out],
            } = l?;
            if send.len() + recv.len() < MIN_FIGURES_HOST {
                send.extend(send_out);
                recv.extend(recv_out);
            }
            let all: Vec<f64> = send.iter().chain(&recv).copied().collect();
            Some(HostScore {
                all: score(all, reference),
                send: score(send, reference),
                recv: score(recv, reference),
            })
        })
        .collect()
}

pub(super) fn score(v: Vec<f64>, reference: f64) -> Option<(f64, usize)> {
    let m = v.len();
    median(v).map(|x| ((x - reference).exp(), m))
}

/// Which way a host found slow is slow: one direction when the other is less than half as far
/// below the reference (in log scale), else both.
fn which_way(s: &HostScore, t: &Thresholds) -> Rule {
    let (Some((send, _)), Some((recv, _))) = (s.send, s.recv) else {
        return Rule::BwHost;
    };
    let (ds, dr) = (send.ln(), recv.ln());
    let below = t.min_bw_ratio.ln();
    if ds < below && dr > ds / 2.0 {
        Rule::BwSend
    } else if dr < below && ds > dr / 2.0 {
        Rule::BwRecv
    } else {
        Rule::BwHost
    }
}

/// `bw-host`, `bw-send`, `bw-recv`: slow hosts, peeled worst first. Each pass scores every
/// host on its pairs with hosts not yet found slow (where that leaves enough figures), so a
/// slow host does not make its partners look slow, and takes the hosts at least half as far
/// below as the worst.
pub(super) fn hosts(ctx: &Ctx) -> Vec<(Ix, Charge)> {
    let (r, t) = (ctx.r, ctx.t);
    let (Some(reference), Some(spread)) = (r.bw_gbps.map(f64::ln), r.bw_spread) else {
        return Vec::new();
    };
    let sig = noise_sigmas(r.hosts);
    let low_with = |s: Option<(f64, usize)>, min: usize| {
        s.is_some_and(|(x, m)| m >= min && r.bw_low(x, m, sig, t))
    };
    let mut found = vec![false; ctx.s.hosts()];
    let mut out = Vec::new();
    for _pass in 0..16 {
        let hs = host_scores(ctx, &found, reference);
        let mut lows: Vec<(Ix, Rule, f64, &HostScore)> = Vec::new();
        for (h, s) in hs.iter().enumerate() {
            let Some(s) = s.as_ref().filter(|_| !found[h]) else {
                continue;
            };
            let h = h as Ix;
            let rule = match (
                low_with(s.send, MIN_FIGURES_DIRECTION),
                low_with(s.recv, MIN_FIGURES_DIRECTION),
                low_with(s.all, MIN_FIGURES_HOST),
            ) {
                (true, false, _) => Rule::BwSend,
                (false, true, _) => Rule::BwRecv,
                (true, true, _) | (_, _, true) => which_way(s, t),
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
            found[h as usize] = true;
            let fmt = |s: Option<(f64, usize)>| {
                s.map_or("-".into(), |(x, m)| format!("{x:.2} x over {m} figures"))
            };
            let (what, direction) = match rule {
                Rule::BwSend => ("sends slowly", Direction::Send),
                Rule::BwRecv => ("receives slowly", Direction::Receive),
                _ => ("is slow both ways", Direction::Both),
            };
            let mut charge = Charge::new(
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
            );
            charge.direction = Some(direction);
            charge.sigmas = sig;
            // The schedule's sighting: its score in the direction it is slow.
            charge.ratios = match rule {
                Rule::BwSend => s.send,
                Rule::BwRecv => s.recv,
                _ => s.all,
            }
            .map(|(x, _)| vec![x])
            .unwrap_or_default();
            out.push((h, charge));
        }
    }
    out
}

/// `bw-group`: hosts found slow both ways that are fast among themselves, beyond the noise (a
/// shared switch, uplink or partition, reported once). Returns the groups' charges and their
/// members.
pub(super) fn groups(ctx: &Ctx, hosts: &[(Ix, Charge)]) -> (Charges, BTreeSet<Ix>) {
    let (r, t) = (ctx.r, ctx.t);
    let mut out = Vec::new();
    let mut grouped: BTreeSet<Ix> = BTreeSet::new();
    let (Some(reference), Some(spread)) = (r.bw_gbps.map(f64::ln), r.bw_spread) else {
        return (out, grouped);
    };
    let sig = noise_sigmas(r.hosts);
    let slow_set: BTreeSet<Ix> = hosts
        .iter()
        .filter(|(_, c)| c.rule == Rule::BwHost)
        .map(|(h, _)| *h)
        .collect();
    let mut slow = vec![false; ctx.s.hosts()];
    for h in &slow_set {
        slow[*h as usize] = true;
    }
    let fast = |p: &Fig| {
        let v: Vec<f64> = p.bw_figures().collect();
        let m = v.len();
        median(v).is_some_and(|x| !r.bw_low(x / reference.exp(), m, sig, t))
    };
    let mut parent: BTreeMap<Ix, Ix> = slow_set.iter().map(|h| (*h, *h)).collect();
    fn root(parent: &BTreeMap<Ix, Ix>, mut h: Ix) -> Ix {
        while parent[&h] != h {
            h = parent[&h];
        }
        h
    }
    for (_, p) in ctx
        .ok()
        .filter(|(_, p)| slow[p.a as usize] && slow[p.b as usize])
    {
        if fast(p) {
            let (ra, rb) = (root(&parent, p.a), root(&parent, p.b));
            if ra != rb {
                parent.insert(ra, rb);
            }
        }
    }
    let mut candidates: BTreeMap<Ix, Vec<Ix>> = BTreeMap::new();
    for h in &slow_set {
        candidates.entry(root(&parent, *h)).or_default().push(*h);
    }
    // A group stands: its pairs inside are faster than its pairs out, beyond the noise (two
    // slow hosts that are merely as slow together are two hosts, not a switch).
    let logs = |v: Vec<f64>| {
        let m = v.len();
        median(v.into_iter().filter(|x| *x > 0.0).map(f64::ln).collect()).map(|x| (x, m))
    };
    for g in candidates.values().filter(|g| g.len() >= 2) {
        let mut member = vec![false; ctx.s.hosts()];
        for h in g {
            member[*h as usize] = true;
        }
        let (mut inside, mut outside) = (Vec::new(), Vec::new());
        for (_, p) in ctx.ok() {
            match (member[p.a as usize], member[p.b as usize]) {
                (true, true) => inside.extend(p.bw_figures()),
                (false, false) => {}
                _ => outside.extend(p.bw_figures()),
            }
        }
        let (Some((xi, ni)), Some((xo, no))) = (logs(inside), logs(outside)) else {
            continue;
        };
        let gate = sig * se(spread, ni).hypot(se(spread, no));
        if xi - xo <= gate {
            continue;
        }
        grouped.extend(g.iter().copied());
        let mut charge = Charge::new(
            Rule::BwGroup,
            format!(
                "{} hosts are fast among themselves ({:.2} x the reference over {ni} figures) \
                 but slow to the rest ({:.2} x over {no}): a shared switch, uplink or \
                 partition, not {} separate hosts",
                g.len(),
                (xi - reference).exp(),
                (xo - reference).exp(),
                g.len()
            ),
        );
        charge.direction = Some(Direction::Both);
        charge.sigmas = sig;
        out.push((
            Target::Group {
                members: g
                    .iter()
                    .map(|h| (ctx.s.rank(*h), ctx.s.name(*h).to_string()))
                    .collect(),
            },
            charge,
        ));
    }
    (out, grouped)
}

/// The gate a bandwidth figure at `ratio` (one figure) meets: beyond the noise, gross, or
/// below the ratio where the retest budget's figures could still decide it.
pub(super) fn gate_of(
    ratio: f64,
    m: usize,
    sig: f64,
    r: &Reference,
    t: &Thresholds,
) -> Option<Gate> {
    if r.bw_low(ratio, m, sig, t) {
        Some(Gate::Noise)
    } else if ratio <= GROSS_BW_RATIO.min(t.min_bw_ratio) {
        Some(Gate::Gross)
    } else if t.retest_rounds > 0 && r.bw_low_mean(ratio, m + t.retest_rounds as usize, sig, t) {
        Some(Gate::Undecided)
    } else {
        None
    }
}

/// `bw-link`: between hosts not found slow, each direction judged on its own (a direction far
/// below the reference is a suspect link whatever its reverse does), and the pair's two
/// directions together (geometric mean) for a link slow both ways by less. A host that sends
/// (or receives) slowly on most of its pairs (two or more) is one `bw-send` (`bw-recv`)
/// suspect, not that many links. Returns those charges, and apart the charges of the pairs
/// with a host in `slow`: held, they are judged only if that host's retests clear it.
pub(super) fn links(ctx: &Ctx, slow: &[bool]) -> (Charges, Charges) {
    let (r, t) = (ctx.r, ctx.t);
    let Some(reference) = r.bw_gbps else {
        return (Vec::new(), Vec::new());
    };
    // As many tests as the pairs' flags count: every direction.
    let sig = noise_sigmas(r.bw_figures);
    let mut charges: Vec<(&Fig, Charge)> = Vec::new();
    // Per host: its pairs judged here, and the directions charged from and to it.
    let mut per_host: Vec<(usize, Vec<usize>, Vec<usize>)> =
        vec![(0, Vec::new(), Vec::new()); ctx.s.hosts()];
    let mut held: Vec<(Target, Charge)> = Vec::new();
    for (_, p) in ctx.ok() {
        let free = !slow[p.a as usize] && !slow[p.b as usize];
        if free {
            per_host[p.a as usize].0 += 1;
            per_host[p.b as usize].0 += 1;
        }
        let dirs = [
            (p.bw(), p.a, p.b, p.bw_reverse(), Direction::Send),
            (p.bw_reverse(), p.b, p.a, p.bw(), Direction::Receive),
        ];
        let mut charged = 0;
        for (v, fi, ti, back, direction) in dirs {
            let Some(v) = v else { continue };
            let ratio = v / reference;
            let Some(gate) = gate_of(ratio, 1, sig, r, t) else {
                continue;
            };
            charged += 1;
            let (from, to) = (ctx.s.name(fi), ctx.s.name(ti));
            let reverse = back.map_or(String::new(), |b| {
                format!(" ({to} to {from} {b:.3}, {:.2} x)", b / reference)
            });
            let reason = format!(
                "{from} to {to} {v:.3} Gb/s is {ratio:.2} x the reference {reference:.3}{reverse}: \
                 {}",
                match gate {
                    Gate::Noise => "below the ratio and beyond the noise",
                    Gate::Gross => "at half the reference or below, within the noise (retested)",
                    Gate::Undecided =>
                        "below the ratio, within the noise (retested for more figures)",
                }
            );
            let charge = Charge {
                rule: Rule::BwLink,
                reason,
                gate,
                direction: Some(direction),
                ratios: vec![ratio],
                sigmas: sig,
            };
            if !free {
                held.push((ctx.link(p), charge));
                continue;
            }
            per_host[fi as usize].1.push(charges.len());
            per_host[ti as usize].2.push(charges.len());
            charges.push((p, charge));
        }
        // Both ways by less: the two directions together.
        if let (0, Some(x), Some(y)) = (charged, p.bw(), p.bw_reverse()) {
            let mean = (x * y).sqrt() / reference;
            if r.bw_low(mean, 2, sig, t) {
                let both: (&Fig, Charge) = (
                    p,
                    Charge {
                        rule: Rule::BwLink,
                        reason: format!(
                            "both ways slow: {x:.3} and {y:.3} Gb/s, together {mean:.2} x the \
                             reference {reference:.3}; below the ratio and beyond the noise"
                        ),
                        gate: Gate::Noise,
                        direction: Some(Direction::Both),
                        ratios: vec![x / reference, y / reference],
                        sigmas: sig,
                    },
                );
                if free {
                    charges.push(both);
                } else {
                    held.push((ctx.link(p), both.1));
                }
            }
        }
    }
    // Hosts that send or receive slowly on most of their pairs.
    let mut taken: BTreeSet<usize> = BTreeSet::new();
    let mut out: Vec<(Target, Charge)> = Vec::new();
    for (host, (n, sends, recvs)) in per_host.iter().enumerate() {
        for (list, rule, what) in [
            (sends, Rule::BwSend, "sends"),
            (recvs, Rule::BwRecv, "receives"),
        ] {
            // Directions that stood out or were gross (a small deficit within the noise on one
            // figure says nothing of its host).
            let fresh: Vec<usize> = list
                .iter()
                .copied()
                .filter(|i| !taken.contains(i) && charges[*i].1.gate != Gate::Undecided)
                .collect();
            if fresh.len() < 2 || 2 * fresh.len() <= *n {
                continue;
            }
            let figures: Vec<f64> = fresh.iter().map(|i| charges[*i].1.ratios[0]).collect();
            let gate = if fresh.iter().any(|i| charges[*i].1.gate == Gate::Noise) {
                Gate::Noise
            } else {
                Gate::Gross
            };
            // Every direction it sends (receives) that was charged is the host's now, held.
            taken.extend(list.iter().copied());
            out.push((
                ctx.host(host as Ix),
                Charge {
                    rule,
                    reason: format!(
                        "{what} slowly on {} of its {n} pairs ({} x the reference {reference:.3} \
                         Gb/s)",
                        fresh.len(),
                        figures
                            .iter()
                            .map(|x| format!("{x:.2}"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    gate,
                    direction: Some(if rule == Rule::BwSend {
                        Direction::Send
                    } else {
                        Direction::Receive
                    }),
                    ratios: figures,
                    sigmas: sig,
                },
            ));
        }
    }
    // The directions a bw-send/bw-recv host took stay held under it: judged as links if its
    // retests clear it.
    for (i, (p, charge)) in charges.into_iter().enumerate() {
        if taken.contains(&i) {
            held.push((ctx.link(p), charge));
        } else {
            out.push((ctx.link(p), charge));
        }
    }
    (out, held)
}
