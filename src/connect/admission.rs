//! Who keeps a place when a listener's places for unproven connections are full: the policy
//! rank 0's rendezvous and a `--persist` server share. A peer that has not proved itself holds
//! its place for [`EVICT_AFTER`] at most against a newcomer (a real peer's handshake takes
//! milliseconds), so connections that trickle a byte now and then cannot keep the real ones out.

use std::time::{Duration, Instant};

/// How long an unproven connection holds its place against a newer one.
pub const EVICT_AFTER: Duration = Duration::from_secs(1);

/// What to do with a newcomer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit<Id> {
    /// A place is free.
    Room,
    /// Close this unproven connection, held for this long, and give its place to the newcomer.
    Evict(Id, Duration),
    /// Every place is taken by a proven peer or one that came less than [`EVICT_AFTER`] ago:
    /// turn the newcomer away.
    Full,
}

/// Whether a newcomer gets a place: `taken` of `places` are in use, `unproven` are those that
/// may give theirs up (an id and when it came).
pub fn admit<Id>(
    taken: usize,
    places: usize,
    unproven: impl Iterator<Item = (Id, Instant)>,
) -> Admit<Id> {
    if taken < places {
        return Admit::Room;
    }
    match oldest(unproven) {
        Some((id, held)) if held >= EVICT_AFTER => Admit::Evict(id, held),
        _ => Admit::Full,
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

    #[test]
    fn the_oldest_unproven_gives_way_once_it_has_held_its_place_long_enough() {
        let now = Instant::now();
        let long_ago = now - 2 * EVICT_AFTER;
        let just_now = now - EVICT_AFTER / 10;
        let none = std::iter::empty::<(u32, Instant)>;
        assert_eq!(admit(1, 2, none()), Admit::Room);
        assert_eq!(admit(2, 2, none()), Admit::Full, "only proven peers");
        assert_eq!(admit(2, 2, [(7, just_now)].into_iter()), Admit::Full);
        match admit(2, 2, [(7, just_now), (9, long_ago)].into_iter()) {
            Admit::Evict(9, held) => assert!(held >= 2 * EVICT_AFTER),
            other => panic!("{other:?}"),
        }
        assert_eq!(oldest(none()), None);
    }
}
