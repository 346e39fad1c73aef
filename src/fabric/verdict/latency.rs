//! The latency rules: hosts whose median latency is high, then links between other hosts.

use super::*;

/// `lat-host`: a host whose median latency is above the ratio and beyond the noise.
pub(super) fn hosts(ctx: &Ctx) -> Vec<(Target, Charge)> {
    let (r, t) = (ctx.r, ctx.t);
    let (Some(reference), Some(spread)) = (r.lat_us.map(f64::ln), r.lat_spread) else {
        return Vec::new();
    };
    let per = per_host_logs(&ctx.ok, lat_figures);
    let sig = noise_sigmas(per.len());
    let mut out = Vec::new();
    for (h, v) in &per {
        if let Some((x, m)) = bandwidth::score(v.clone(), reference)
            && m >= MIN_FIGURES_DIRECTION
            && r.lat_high(x, m, sig, t)
        {
            let mut charge = Charge::new(
                Rule::LatHost,
                format!(
                    "its median latency is {x:.2} x the reference {:.1} us over {m} pairs; \
                     above {} x and beyond the noise ({:.0} %, {sig:.1} standard errors)",
                    reference.exp(),
                    t.max_lat_ratio,
                    100.0 * spread
                ),
            );
            charge.sigmas = sig;
            out.push((ctx.host(h), charge));
        }
    }
    out
}

/// `lat-link`: a pair whose latency is high while neither host is a suspect (`slow`).
pub(super) fn links(ctx: &Ctx, slow: &BTreeSet<String>) -> Vec<(Target, Charge)> {
    let (r, t) = (ctx.r, ctx.t);
    let Some(reference) = r.lat_us else {
        return Vec::new();
    };
    let sig = noise_sigmas(ctx.ok.len());
    let mut out = Vec::new();
    for p in &ctx.ok {
        if slow.contains(&p.a) || slow.contains(&p.b) {
            continue;
        }
        let Some(x) = p.lat_us.map(|v| v / reference) else {
            continue;
        };
        if r.lat_high(x, 1, sig, t) {
            let mut charge = Charge::new(
                Rule::LatLink,
                format!(
                    "the pair's latency is {x:.2} x the reference {reference:.1} us, while {} \
                     and {} are fine with their other pairs",
                    p.a, p.b
                ),
            );
            charge.sigmas = sig;
            out.push((ctx.link(p), charge));
        }
    }
    out
}
