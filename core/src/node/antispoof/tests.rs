use knid_netops::nft::{Guard, GuardChain};

use super::difference;

fn guard() -> Guard {
    Guard {
        device: "kn0000000001".into(),
        mac: [0x02, 0, 0, 0, 0, 1],
        addresses: vec!["10.88.0.5".parse().expect("ip")],
    }
}

fn chain(summary: &str) -> GuardChain {
    GuardChain {
        table: "knid-25".into(),
        name: "kn0000000001".into(),
        device: "kn0000000001".into(),
        summary: summary.into(),
    }
}

#[test]
fn a_guard_differs_when_missing_hooked_elsewhere_or_built_for_other_addresses() {
    let want = guard();
    assert_eq!(difference(&want, Some(&[chain(&want.summary())])), None);
    assert_eq!(
        difference(&want, None).as_deref(),
        Some("kn0000000001 has no source guard")
    );
    assert!(difference(&want, Some(&[])).is_some());
    let mut elsewhere = chain(&want.summary());
    elsewhere.device = "eth0".into();
    assert!(difference(&want, Some(&[elsewhere])).is_some_and(|d| d.contains("hooks \"eth0\"")));
    let stale = difference(&want, Some(&[chain("02:00:00:00:00:01 10.88.0.9")]));
    assert!(stale.is_some_and(|d| d.contains("10.88.0.9")));
}

mod shared_commit {
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use super::super::shared_commit::SharedCommit;
    use crate::error::{Error, Result};
    use crate::locks::LockExt;

    type Commits = Arc<Mutex<Vec<(Vec<u32>, bool)>>>;

    /// Queues `items` (each from a thread of its own) while the lock is held elsewhere, then
    /// lets them go; `bad` fails any commit that holds it. Returns each item's answer and the
    /// commits made, in order, each with whether it succeeded.
    fn run_behind_the_lock(items: &[u32], bad: Option<u32>) -> (Vec<(u32, Result<()>)>, Commits) {
        let shared = Arc::new(SharedCommit::<u32>::new());
        let lock = Arc::new(Mutex::new(()));
        let commits: Commits = Arc::default();
        let held = lock.acquire();
        let threads: Vec<_> = items
            .iter()
            .map(|&item| {
                let (shared, lock, commits) = (shared.clone(), lock.clone(), commits.clone());
                std::thread::spawn(move || {
                    let answer = shared.run(&lock, item, |batch| {
                        let ok = !bad.is_some_and(|b| batch.contains(&b));
                        commits.acquire().push((batch.to_vec(), ok));
                        if ok {
                            Ok(())
                        } else {
                            Err(Error::FailedPrecondition(format!(
                                "{batch:?} holds a bad one"
                            )))
                        }
                    });
                    (item, answer)
                })
            })
            .collect();
        let start = Instant::now();
        while shared.queued() < items.len() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "items never queued"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(held);
        let answers = threads
            .into_iter()
            .map(|t| t.join().expect("thread"))
            .collect();
        (answers, commits)
    }

    #[test]
    fn guards_that_wait_for_the_lock_together_go_in_one_commit() {
        let (answers, commits) = run_behind_the_lock(&[1, 2, 3, 4, 5, 6], None);
        assert!(answers.iter().all(|(_, a)| a.is_ok()), "{answers:?}");
        let commits = commits.acquire();
        assert_eq!(commits.len(), 1, "{commits:?}");
        let mut items = commits[0].0.clone();
        items.sort_unstable();
        assert_eq!(items, vec![1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn a_failed_shared_commit_gives_each_its_own_answer_and_loses_none() {
        let (answers, commits) = run_behind_the_lock(&[1, 2, 3, 4], Some(3));
        for (item, answer) in &answers {
            assert_eq!(answer.is_err(), *item == 3, "item {item}: {answer:?}");
        }
        let commits = commits.acquire();
        assert!(!commits[0].1 && commits[0].0.len() == 4, "{commits:?}");
        for item in [1, 2, 4] {
            assert!(
                commits
                    .iter()
                    .any(|(batch, ok)| *ok && batch.contains(&item)),
                "{item} never committed: {commits:?}"
            );
        }
    }

    #[test]
    fn a_guard_alone_commits_alone() {
        let (answers, commits) = run_behind_the_lock(&[7], None);
        assert!(answers[0].1.is_ok());
        assert_eq!(*commits.acquire(), vec![(vec![7], true)]);
    }
}

/// Start-up builds the guards from the records' few fields: the same guards, for every kind,
/// family and network, as from the whole conversion.
#[test]
fn a_usable_record_reads_as_the_same_guard_as_its_whole_conversion() {
    use knid_store::{AttachmentRecord, AttachmentState as RecState, IpRecord};
    use protobuf::EnumOrUnknown;

    use crate::config::{Config, Network};
    use crate::records::attachment_from_record;

    let networks: Vec<Network> = Config::from_toml(
        "[networks.g]\nbridge = \"kn0\"\nsubnets = [\"10.1.0.0/24\", \"fd00:1::/64\"]\n\
         [networks.open]\nbridge = \"kn1\"\nantispoof = false\nsubnets = [\"10.2.0.0/24\"]\n",
    )
    .expect("config")
    .networks()
    .expect("networks");
    let record = |kind: &str, mac: &str, ips: &[&str]| AttachmentRecord {
        sandbox_id: "s".into(),
        ifname: "eth0".into(),
        network: "g".into(),
        kind: kind.into(),
        state: EnumOrUnknown::new(RecState::ATTACHED),
        mac: mac.into(),
        host_ifname: "kn0000000001".into(),
        ips: ips
            .iter()
            .map(|a| IpRecord {
                address: (*a).into(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    let records = [
        record(
            "veth",
            "02:00:00:00:00:01",
            &["10.1.0.5/24", "fd00:1::5/64"],
        ),
        record("veth", "02:00:00:00:00:02", &["10.1.0.6/24"]),
        record("tap", "02:00:00:00:00:03", &["fd00:1::7/64"]),
        record("macvlan", "02:00:00:00:00:04", &["10.1.0.8/24"]),
        record("cni", "", &["10.1.0.9/24"]),
        record("cni", "02:00:00:00:00:05", &["10.1.0.10/24"]),
    ];
    let mut guarded = 0;
    for network in &networks {
        for rec in &records {
            let iface = attachment_from_record(rec).expect("a usable record");
            let whole = super::guard_of(network, &iface);
            guarded += usize::from(whole.is_some());
            assert_eq!(
                super::guard_of_usable(network, rec),
                whole,
                "{} on {}",
                rec.kind,
                network.name
            );
        }
    }
    // The veths and the tap on the guarding network: the comparison saw guards, not only None.
    assert_eq!(guarded, 3);
}
