//! After the retests: links confirmed slow the same way at one host, on most of its pairs, are
//! that host.
//!
//! Before the retests a host is charged when most of its scheduled figures are low beyond the
//! noise; in a small fabric with a heavy-tailed noise its figures may fall either side of that
//! gate (the lab's 4-host simulation: a host sending at half the reference, its three figures
//! 0.44, 0.52 and 0.56 x, two "within the noise"), and then each of its pairs is charged as a
//! link and each is confirmed by its retests. Three slow links out of one host are its NIC,
//! cable or port, not three cables: one finding, as an operator would write it.

use super::retest::{State, Trial};
use super::*;
use std::collections::HashMap;

/// A link's end: its rank and host.
type End = (u32, String);

/// A host's confirmed links (places in the list of them): slow out of it, and into it.
type OutIn = (Vec<usize>, Vec<usize>);

/// Which ends a confirmed link trial is slow from: (from a, from b), by its bandwidth charges
/// whose retests confirmed them. None when no bandwidth charge stands.
fn slow_from(x: &Trial, r: &Reference, t: &Thresholds) -> Option<(bool, bool)> {
    let mut from = (false, false);
    for c in x.suspect.charges.iter().filter(|c| c.rule == Rule::BwLink) {
        if x.charge_state(c, r, t) != State::Confirmed {
            continue;
        }
        match c.direction {
            Some(Direction::Send) => from.0 = true,
            Some(Direction::Receive) => from.1 = true,
            _ => from = (true, true),
        }
    }
    (from.0 || from.1).then_some(from)
}

/// Replace the confirmed links slow out of (into) one host on at least two of its pairs and
/// more than half of them with one confirmed `bw-send` (`bw-recv`; `bw-host` when both) trial
/// of that host, holding their retests. `pairs_of` counts each host's judged pairs.
pub(super) fn hosts_of_links(
    trials: Vec<Trial>,
    pairs_of: &HashMap<u32, usize>,
    r: &Reference,
    t: &Thresholds,
) -> Vec<Trial> {
    // Each confirmed link: (trial, a, b, slow from a, slow from b).
    let mut links: Vec<(usize, End, End, bool, bool)> = Vec::new();
    for (i, x) in trials.iter().enumerate() {
        if x.state != State::Confirmed {
            continue;
        }
        if let Target::Link { a, b } = &x.suspect.target
            && let Some((fa, fb)) = slow_from(x, r, t)
        {
            links.push((i, a.clone(), b.clone(), fa, fb));
        }
    }
    // Per host: the links slow out of it, and into it.
    let mut per_host: BTreeMap<End, OutIn> = BTreeMap::new();
    for (k, (_, a, b, fa, fb)) in links.iter().enumerate() {
        if *fa {
            per_host.entry(a.clone()).or_default().0.push(k);
            per_host.entry(b.clone()).or_default().1.push(k);
        }
        if *fb {
            per_host.entry(b.clone()).or_default().0.push(k);
            per_host.entry(a.clone()).or_default().1.push(k);
        }
    }
    let most = |k: usize, host: u32| k >= 2 && 2 * k > pairs_of.get(&host).copied().unwrap_or(0);
    // The hosts with the most such links first; a link goes to one host at most.
    let mut order: Vec<(&End, &OutIn)> = per_host.iter().collect();
    order.sort_by_key(|(h, (out, inn))| (std::cmp::Reverse(out.len().max(inn.len())), h.0));
    let mut taken = vec![false; links.len()];
    let mut merged: Vec<Trial> = Vec::new();
    let mut gone = vec![false; trials.len()];
    for (host, (out, inn)) in order {
        let free =
            |v: &Vec<usize>| -> Vec<usize> { v.iter().copied().filter(|k| !taken[*k]).collect() };
        let (out, inn) = (free(out), free(inn));
        let (sends, recvs) = (most(out.len(), host.0), most(inn.len(), host.0));
        let (rule, direction, what, mine) = match (sends, recvs) {
            (true, true) => (Rule::BwHost, Direction::Both, "is slow both ways", {
                let mut v = out.clone();
                v.extend(inn.iter().copied().filter(|k| !out.contains(k)));
                v
            }),
            (true, false) => (Rule::BwSend, Direction::Send, "sends slowly", out),
            (false, true) => (Rule::BwRecv, Direction::Receive, "receives slowly", inn),
            (false, false) => continue,
        };
        let n = pairs_of.get(&host.0).copied().unwrap_or(0);
        let mut ratios = Vec::new();
        let mut retests = Vec::new();
        let mut names = Vec::new();
        for k in &mine {
            taken[*k] = true;
            let (i, a, b, ..) = &links[*k];
            gone[*i] = true;
            let x = &trials[*i];
            ratios.extend(
                x.suspect
                    .charges
                    .iter()
                    .filter(|c| c.rule == Rule::BwLink)
                    .flat_map(|c| c.ratios.iter().copied()),
            );
            retests.extend(x.retests.iter().cloned());
            let other = if a.0 == host.0 { &b.1 } else { &a.1 };
            names.push(other.clone());
        }
        let sigmas = trials[links[mine[0]].0]
            .suspect
            .charges
            .iter()
            .map(|c| c.sigmas)
            .fold(MIN_SIGMAS, f64::max);
        merged.push(Trial {
            suspect: Suspect {
                target: Target::Host {
                    rank: host.0,
                    host: host.1.clone(),
                },
                charges: vec![Charge {
                    rule,
                    reason: format!(
                        "{what} on {} of its {n} pairs (to and from {}), each link slow again \
                         in its retests: one host, not {} links",
                        mine.len(),
                        names.join(", "),
                        mine.len()
                    ),
                    gate: Gate::Noise,
                    direction: Some(direction),
                    ratios,
                    sigmas,
                }],
            },
            retests,
            state: State::Confirmed,
        });
    }
    if merged.is_empty() {
        return trials;
    }
    let mut out: Vec<Trial> = merged;
    out.extend(
        trials
            .into_iter()
            .zip(gone)
            .filter(|(_, g)| !g)
            .map(|(x, _)| x),
    );
    out
}
