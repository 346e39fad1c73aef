"""Shared by the bench reports: the lab guest's two states in a set of per-round figures.

Under TCG the guest falls for whole runs into a slower state (a lat WRITE round's median about
12.5-14.5 us against 8.5-10), whichever tool runs; the median of rounds then says how many rounds
each tool spent there. These split the rounds by state so that like is compared with like.
"""
import math
import statistics


def state_split(ours, theirs):
    """The guest's fast and slow states in one latency row: the threshold between two classes of
    all rounds (both tools) with the least spread within each (in log terms), kept only where
    the classes stand apart (their means 3 pooled standard deviations or more apart, 2+ rounds
    each). Returns (threshold, (ours fast, ours slow), (theirs fast, theirs slow)) or None."""
    xs = sorted(math.log(x) for x in ours + theirs if x > 0)
    best = None
    for i in range(2, len(xs) - 1):
        lo, hi = xs[:i], xs[i:]
        mlo, mhi = statistics.fmean(lo), statistics.fmean(hi)
        within = sum((x - mlo) ** 2 for x in lo) + sum((x - mhi) ** 2 for x in hi)
        if best is None or within < best[0]:
            best = (within, i)
    if best is None:
        return None
    within, i = best
    lo, hi = xs[:i], xs[i:]
    pooled = math.sqrt(within / max(len(xs) - 2, 1))
    if statistics.fmean(hi) - statistics.fmean(lo) < 3 * pooled or pooled == 0:
        return None
    cut = math.exp((xs[i - 1] + xs[i]) / 2)
    part = lambda v: ([x for x in v if x < cut], [x for x in v if x >= cut])
    return cut, part(ours), part(theirs)


def state_line(split, unit, fmt):
    """One line: per state, each tool's rounds and median and their ratio."""
    cut, (of, os_), (tf, ts) = split

    def side(o, t):
        if not o or not t:
            return f"{len(o)} vs {len(t)} rounds, no ratio"
        mo, mt = statistics.median(o), statistics.median(t)
        return f"{len(o)} vs {len(t)} rounds, medians {mo:{fmt}} vs {mt:{fmt}}: {mo / mt:.2f}x"

    return f"under {cut:{fmt}} {unit}: {side(of, tf)}; over: {side(os_, ts)}"
