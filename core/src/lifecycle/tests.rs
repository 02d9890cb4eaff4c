use super::Event::*;
use super::*;

const ALL: [AttachmentState; 6] = [
    Pending,
    Provisioning,
    Attached,
    Detaching,
    Reaping,
    RollingBack,
];
const EVENTS: [Event; 8] = [
    Provision,
    Provisioned,
    RolledForward,
    Fail,
    RolledBack,
    Detach,
    Retired,
    Reaped,
];

fn record(state: AttachmentState) -> AttachmentRecord {
    AttachmentRecord {
        sandbox_id: "s1".into(),
        ifname: "eth0".into(),
        state: EnumOrUnknown::new(state_to_record(state)),
        updated_at_ms: 1,
        ..Default::default()
    }
}

fn assert_edge(from: AttachmentState, event: Event, to: Next) {
    let mut rec = record(from);
    assert_eq!(
        advance(&mut rec, event, 99).unwrap(),
        to,
        "{from:?} on {event:?}"
    );
    match to {
        Next::State(state) => {
            assert_eq!(state_of(&rec).unwrap(), state);
            assert_eq!(rec.updated_at_ms, 99);
        }
        Next::Gone => assert_eq!(state_of(&rec).unwrap(), from, "a gone record is untouched"),
    }
}

#[test]
fn a_new_attachment_starts_pending() {
    assert_eq!(INITIAL, Pending);
}

#[test]
fn pending_provisions() {
    assert_edge(Pending, Provision, Next::State(Provisioning));
}

#[test]
fn provisioning_succeeds_to_attached() {
    assert_edge(Provisioning, Provisioned, Next::State(Attached));
}

#[test]
fn only_provisioning_is_rolled_forward_to_attached() {
    assert_edge(Provisioning, RolledForward, Next::State(Attached));
    assert!(next(Pending, RolledForward).is_none());
    assert!(next(RollingBack, RolledForward).is_none());
}

#[test]
fn pending_fails_to_rolling_back() {
    assert_edge(Pending, Fail, Next::State(RollingBack));
}

#[test]
fn provisioning_fails_to_rolling_back() {
    assert_edge(Provisioning, Fail, Next::State(RollingBack));
}

#[test]
fn a_retried_rollback_stays_rolling_back() {
    assert_edge(RollingBack, Fail, Next::State(RollingBack));
}

#[test]
fn rolled_back_is_gone() {
    assert_edge(RollingBack, RolledBack, Next::Gone);
}

#[test]
fn attached_detaches() {
    assert_edge(Attached, Detach, Next::State(Detaching));
}

#[test]
fn a_retried_detach_stays_detaching() {
    assert_edge(Detaching, Detach, Next::State(Detaching));
}

#[test]
fn detaching_retires_to_reaping() {
    assert_edge(Detaching, Retired, Next::State(Reaping));
}

#[test]
fn reaped_is_gone() {
    assert_edge(Reaping, Reaped, Next::Gone);
}

#[test]
fn every_edge_not_in_the_diagram_is_refused_and_changes_nothing() {
    let allowed = [
        (Pending, Provision),
        (Provisioning, Provisioned),
        (Provisioning, RolledForward),
        (Pending, Fail),
        (Provisioning, Fail),
        (RollingBack, Fail),
        (RollingBack, RolledBack),
        (Attached, Detach),
        (Detaching, Detach),
        (Detaching, Retired),
        (Reaping, Reaped),
    ];
    let mut refused = 0;
    for from in ALL {
        for event in EVENTS {
            if allowed.contains(&(from, event)) {
                assert!(next(from, event).is_some());
                continue;
            }
            refused += 1;
            let mut rec = record(from);
            let err = advance(&mut rec, event, 99).unwrap_err();
            assert!(
                err.to_string().contains("s1/eth0"),
                "names the record: {err}"
            );
            assert_eq!(
                rec,
                record(from),
                "{from:?} on {event:?} changed the record"
            );
        }
    }
    assert_eq!(refused, ALL.len() * EVENTS.len() - allowed.len());
}

#[test]
fn check_ends_accepts_only_paths_to_gone() {
    assert!(check_ends(&record(Reaping), &[Reaped]).is_ok());
    assert!(check_ends(&record(Detaching), &[Retired, Reaped]).is_ok());
    assert!(check_ends(&record(RollingBack), &[RolledBack]).is_ok());
    assert!(check_ends(&record(Detaching), &[Retired]).is_err());
    assert!(check_ends(&record(Attached), &[Reaped]).is_err());
}

#[test]
fn advance_all_changes_every_record_or_fails() {
    let mut recs = [record(Attached), record(Detaching)];
    advance_all(&mut recs, Detach, 5).unwrap();
    assert_eq!(writes(&recs).len(), recs.len(), "one write per record");
    assert!(recs.iter().all(|r| state_of(r).unwrap() == Detaching));
    let mut recs = [record(Attached), record(Reaping)];
    assert!(advance_all(&mut recs, Detach, 5).is_err());
}

#[test]
fn an_unknown_state_is_corrupt() {
    let mut rec = record(Attached);
    rec.state = EnumOrUnknown::from_i32(42);
    assert!(matches!(
        advance(&mut rec, Detach, 1),
        Err(Error::Corrupt { .. })
    ));
}

#[test]
fn recovery_rolls_back_attaches_finishes_detaches_and_verifies_the_rest() {
    for state in [Pending, Provisioning, RollingBack] {
        assert_eq!(recovery(state), Recovery::RollBack, "{state:?}");
    }
    for state in [Detaching, Reaping] {
        assert_eq!(recovery(state), Recovery::FinishDetach, "{state:?}");
    }
    assert_eq!(recovery(Attached), Recovery::Verify);
}
