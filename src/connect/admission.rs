//! Who keeps a place when a listener's places for unproven connections are full: the policy
//! rank 0's rendezvous and a `--persist` server share. No address may hold more than
//! [`PER_ADDRESS`] unproven places, so a flood from one host (or a few) cannot take the places
//! the other hosts' peers need; when every place is taken, the address holding the most gives
//! up its oldest, and a peer alone at its address holds its place for [`EVICT_AFTER`] at least
//! (a real peer's handshake takes milliseconds), so connections that trickle a byte now and
//! then cannot keep the real ones out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How long an unproven connection holds its place against a newer one from elsewhere.
pub const EVICT_AFTER: Duration = Duration::from_secs(1);

/// The most unproven connections one address may hold at once (a host runs a few ranks, one
/// per NIC: the rest of its ranks are turned away for a moment and dial again).
pub const PER_ADDRESS: usize = 8;

/// What to do with a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit<Id> {
    /// A place is free.
    Room,
    /// Close this unproven connection, held for this long, and give its place to the newcomer.
    Evict(Id, Duration),
    /// Turn the newcomer away: its address holds [`PER_ADDRESS`] places, none of them for
    /// [`EVICT_AFTER`] yet.
    AddressFull,
    /// Turn the newcomer away: every place is taken by a proven peer or by one alone at its
    /// address that came less than [`EVICT_AFTER`] ago.
    Full,
}

/// One unproven connection: an id, when it came, from where.
pub type Unproven<Id> = (Id, Instant, Option<IpAddr>);

/// Whether a newcomer from `from` gets a place: `taken` of `places` are in use, `unproven`
/// are those that may give theirs up.
pub fn admit<Id: Copy>(
    taken: usize,
    places: usize,
    unproven: &[Unproven<Id>],
    from: Option<IpAddr>,
) -> Admit<Id> {
    let oldest_of = |at: Option<IpAddr>| {
        oldest(
            unproven
                .iter()
                .filter(|(_, _, a)| *a == at)
                .map(|(id, since, _)| (*id, *since)),
        )
    };
    let same = unproven.iter().filter(|(_, _, a)| *a == from).count();
    if same >= PER_ADDRESS {
        return match oldest_of(from) {
            Some((id, held)) if held >= EVICT_AFTER => Admit::Evict(id, held),
            _ => Admit::AddressFull,
        };
    }
    if taken < places {
        return Admit::Room;
    }
    // The address with the most unproven connections gives one up; a tie goes to the address
    // whose oldest came first.
    let mut per: HashMap<Option<IpAddr>, (usize, Instant)> = HashMap::new();
    for (_, since, a) in unproven {
        let e = per.entry(*a).or_insert((0, *since));
        e.0 += 1;
        e.1 = e.1.min(*since);
    }
    let heaviest = per
        .iter()
        .max_by(|x, y| x.1.0.cmp(&y.1.0).then(y.1.1.cmp(&x.1.1)))
        .map(|(a, (n, _))| (*a, *n));
    match heaviest {
        Some((at, n)) if n >= 2 => match oldest_of(at) {
            Some((id, held)) => Admit::Evict(id, held),
            None => Admit::Full,
        },
        _ => match oldest(unproven.iter().map(|(id, since, _)| (*id, *since))) {
            Some((id, held)) if held >= EVICT_AFTER => Admit::Evict(id, held),
            _ => Admit::Full,
        },
    }
}

/// The connection that came first, and how long ago.
pub fn oldest<Id>(of: impl Iterator<Item = (Id, Instant)>) -> Option<(Id, Duration)> {
    of.min_by_key(|(_, since)| *since)
        .map(|(id, since)| (id, since.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, last]))
    }

    #[test]
    fn a_peer_alone_at_its_address_holds_its_place_for_a_second() {
        let now = Instant::now();
        let long_ago = now - 2 * EVICT_AFTER;
        let just_now = now - EVICT_AFTER / 10;
        assert_eq!(admit::<u32>(1, 2, &[], ip(9)), Admit::Room);
        assert_eq!(
            admit::<u32>(2, 2, &[], ip(9)),
            Admit::Full,
            "only proven peers"
        );
        assert_eq!(admit(2, 2, &[(7, just_now, ip(1))], ip(9)), Admit::Full);
        match admit(2, 2, &[(7, just_now, ip(1)), (9, long_ago, ip(2))], ip(9)) {
            Admit::Evict(9, held) => assert!(held >= 2 * EVICT_AFTER),
            other => panic!("{other:?}"),
        }
        assert_eq!(oldest(std::iter::empty::<(u32, Instant)>()), None);
    }

    #[test]
    fn a_flood_from_one_address_cannot_take_the_places_of_others() {
        let now = Instant::now();
        // 8 fresh connections from .66 hold 8 of 12 places, 2 ranks from .1 and .2 the rest.
        let mut held: Vec<Unproven<u32>> = (0..8).map(|i| (i, now, ip(66))).collect();
        assert_eq!(admit(8, 12, &held, ip(66)), Admit::AddressFull);
        assert_eq!(admit(8, 12, &held, ip(1)), Admit::Room);
        held.extend([(100, now, ip(1)), (101, now, ip(2))]);
        // Every place taken: the flood's oldest goes, not a rank's, however fresh.
        held.extend([(8, now - EVICT_AFTER / 2, ip(67)), (9, now, ip(67))]);
        assert!(matches!(admit(12, 12, &held, ip(3)), Admit::Evict(0, _)));
        // The flood's own places turn over once a second old.
        held[0].1 = now - 2 * EVICT_AFTER;
        assert!(matches!(admit(12, 12, &held, ip(66)), Admit::Evict(0, _)));
    }
}
