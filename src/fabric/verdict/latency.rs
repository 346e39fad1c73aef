//! The latency rules: hosts whose median latency is high, then links between other hosts.

use super::*;

/// `lat-host`: a host whose median latency is above the ratio and beyond the noise.
pub(super) fn hosts(ctx: &Ctx) -> Vec<(Ix, Charge)> {
    let (r, t) = (ctx.r, ctx.t);
    let (Some(reference), Some(spread)) = (r.lat_us.map(f64::ln), r.lat_spread) else {
        return Vec::new();
    };
    let per = per_host_logs(ctx.s, ctx.ok().map(|(_, p)| p), lat_figures);
    let sig = noise_sigmas(per.iter().flatten().count());
    let mut out = Vec::new();
    for (h, v) in per.iter().enumerate() {
        let Some(v) = v else { continue };
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
            out.push((h as Ix, charge));
        }
    }
    out
}

/// `lat-link`: a pair whose latency is high while neither host is a suspect (`slow`).
pub(super) fn links(ctx: &Ctx, slow: &[bool]) -> Vec<(Target, Charge)> {
    let (r, t) = (ctx.r, ctx.t);
    let Some(reference) = r.lat_us else {
        return Vec::new();
    };
    let sig = noise_sigmas(ctx.ok().count());
    let mut out = Vec::new();
    for (_, p) in ctx.ok() {
        if slow[p.a as usize] || slow[p.b as usize] {
            continue;
        }
        let Some(x) = p.lat().map(|v| v / reference) else {
            continue;
        };
        if r.lat_high(x, 1, sig, t) {
            let mut charge = Charge::new(
                Rule::LatLink,
                format!(
                    "the pair's latency is {x:.2} x the reference {reference:.1} us, while {} \
                     and {} are fine with their other pairs",
                    ctx.s.name(p.a),
                    ctx.s.name(p.b)
                ),
            );
            charge.sigmas = sig;
            out.push((ctx.link(p), charge));
        }
    }
    out
}
