//! What the fault tests (tests/faults.rs) and the crash tests (tests/crash.rs) share: the
//! failpoints whose crash tests live elsewhere ([`KIND_FAILPOINTS`]); a [`Tally`] of what a test
//! exercised; the check that knid's records and the kernel agree, live
//! ([`leaked_objects`]) and in the store ([`stop_and_check_store`]); and the filesystems knid's
//! state dir is put on — a small tmpfs that a ballast file fills ([`Tmpfs`]), a loop-mounted ext4
//! that turns read-only on an error as a real disk's does with `errors=remount-ro` ([`Ext4`]).
//! Each filesystem guard unmounts what it mounted when dropped, panic or not.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use ipnet::IpNet;
use knid_store::AttachmentState;
use knid_transport::ClientError;
use nix::mount::{mount, umount2, MntFlags, MsFlags};

use crate::assert::expect_code;
use crate::kernel::link_names;
use crate::node::{TestNode, BRIDGE, RPC};
use crate::requests::inspect_req;
use crate::wait::SETTLE;

/// Failpoints outside the veth attach/detach path: their crash tests live with their feature's
/// tests (tests/vm.rs, tests/devices.rs, tests/cni_driver.rs, tests/netns.rs, tests/nat.rs; the
/// store's migration steps in tests/upgrade.rs, on a store of the previous release), not in the
/// veth crash matrix of tests/crash.rs.
pub const KIND_FAILPOINTS: &[&str] = &[
    // tests/antispoof.rs: an older kernel's guards, after their links.
    "antispoof.probe",
    "attach.tap_created",
    "attach.device_moved",
    "attach.dan_written",
    "attach.cni_added",
    "attach.host_ports_added",
    "netns.recorded",
    "netns.deleting",
    "store.migrating",
    "store.migrated",
];

/// What a fault test exercised: each request sent and its outcome (errors counted by code), and
/// what it verified; printed at its end with the number of leaked objects.
pub struct Tally {
    test: String,
    requests: usize,
    errors: BTreeMap<String, usize>,
    checks: Vec<String>,
}

impl Tally {
    /// An empty tally for `test`.
    pub fn new(test: &str) -> Tally {
        Tally {
            test: test.to_owned(),
            requests: 0,
            errors: BTreeMap::new(),
            checks: Vec::new(),
        }
    }

    /// Counts one request and its outcome.
    pub fn count<T>(&mut self, result: &Result<T, ClientError>) {
        self.requests += 1;
        if let Err(e) = result {
            let code = match e.code() {
                Some(code) => knid_transport::errors::code_name(code).to_owned(),
                None => "no answer".to_owned(),
            };
            *self.errors.entry(code).or_default() += 1;
        }
    }

    /// Counts `result` and returns its value, panicking naming `what` if it failed.
    pub fn ok<T>(&mut self, what: &str, result: Result<T, ClientError>) -> T {
        self.count(&result);
        result.unwrap_or_else(|e| panic!("{what}: {e}"))
    }

    /// Counts `result`, checks it failed with `code` and returns the message.
    pub fn fails<T: std::fmt::Debug>(
        &mut self,
        what: &str,
        result: Result<T, ClientError>,
        code: ttrpc::Code,
    ) -> String {
        self.count(&result);
        expect_code(result, code, what)
    }

    /// Notes something the test verified.
    pub fn verified(&mut self, what: impl Into<String>) {
        self.checks.push(what.into());
    }

    /// Prints the tally with `leaked`, the number of leaked objects found.
    pub fn print(&self, leaked: usize) {
        let errors = if self.errors.is_empty() {
            "none".to_owned()
        } else {
            self.errors
                .iter()
                .map(|(code, n)| format!("{code} {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut out = format!(
            "== {}: {} request(s), errors by code: {errors}; leaked objects: {leaked}\n",
            self.test, self.requests
        );
        for check in &self.checks {
            out.push_str(&format!("   - {check}\n"));
        }
        println!("{out}");
    }
}

/// Compares what knid records (List, then Inspect of each sandbox) with the kernel, waiting up
/// to [`SETTLE`] for the reaper: the host ends (`kn*` links, the bridge excepted) are exactly
/// the recorded ones and the bridge's ports; the addresses reserved in `default` are exactly
/// the recorded ones; each sandbox netns holds `lo` and its recorded interfaces only. Returns
/// every difference (a leaked or missing object), so a test can print their number and assert
/// there are none.
pub fn leaked_objects(node: &TestNode) -> Vec<String> {
    let client = node.client();
    let mut host_ends = BTreeSet::new();
    let mut addresses = 0u64;
    let mut netns: Vec<(PathBuf, BTreeSet<String>)> = Vec::new();
    for id in node.list_ids() {
        let req = inspect_req(&id);
        let sandbox = client
            .inspect(&req, RPC)
            .unwrap_or_else(|e| panic!("Inspect {id}: {e}"));
        let mut names: BTreeSet<String> = BTreeSet::from(["lo".to_owned()]);
        for iface in &sandbox.interfaces {
            host_ends.insert(iface.host_ifname.clone());
            addresses += iface.ips.len() as u64;
            names.insert(iface.name.clone());
        }
        netns.push((PathBuf::from(&sandbox.netns_path), names));
    }
    let mut problems = Vec::new();
    let started = Instant::now();
    loop {
        problems.clear();
        let links: BTreeSet<String> = node.host_kn_links().into_iter().map(|l| l.name).collect();
        for leaked in links.difference(&host_ends) {
            problems.push(format!(
                "host link {leaked} belongs to no recorded interface"
            ));
        }
        for missing in host_ends.difference(&links) {
            problems.push(format!(
                "host end {missing} of a recorded interface is missing"
            ));
        }
        let ports: BTreeSet<String> = node
            .bridge_ports(BRIDGE)
            .into_iter()
            .map(|l| l.name)
            .collect();
        if ports != host_ends {
            problems.push(format!(
                "ports of {BRIDGE} {ports:?}, recorded host ends {host_ends:?}"
            ));
        }
        let used = node.capacity_used("default");
        if used != addresses {
            problems.push(format!(
                "{used} address(es) reserved in default, {addresses} recorded"
            ));
        }
        for (path, names) in &netns {
            let found: BTreeSet<String> = link_names(path).into_iter().collect();
            if &found != names {
                problems.push(format!(
                    "{} holds {found:?}, recorded {names:?}",
                    path.display()
                ));
            }
        }
        if problems.is_empty() || started.elapsed() > SETTLE {
            return problems;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Unmounts `path` lazily (knid may still hold files open), tolerating "not mounted".
fn unmount(path: &Path) {
    if let Err(e) = umount2(path, MntFlags::MNT_DETACH) {
        if e != nix::errno::Errno::EINVAL {
            eprintln!("warning: umount {}: {e}", path.display());
        }
    }
}

/// A tmpfs of a fixed size mounted on a directory, unmounted on drop.
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `bytes` on `path` (created if missing).
    pub fn mount(path: &Path, bytes: u64) -> Tmpfs {
        std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        let options = format!("size={bytes},mode=0700");
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some(options.as_str()),
        )
        .unwrap_or_else(|e| panic!("mount tmpfs ({options}) on {}: {e}", path.display()));
        Tmpfs {
            path: path.to_owned(),
        }
    }

    /// The ballast file [`Tmpfs::fill`] writes.
    fn ballast(&self) -> PathBuf {
        self.path.join("ballast")
    }

    /// Fills the filesystem with a ballast file until a write fails with ENOSPC; returns the
    /// ballast's size.
    pub fn fill(&self) -> u64 {
        let mut file = std::fs::File::create(self.ballast()).expect("create the ballast file");
        let chunk = vec![0xa5u8; 4096];
        let mut written = 0u64;
        loop {
            match file.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => panic!("write the ballast file: {e}"),
            }
        }
        written
    }

    /// Removes the ballast: the space comes back.
    pub fn empty(&self) {
        std::fs::remove_file(self.ballast()).expect("remove the ballast file");
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        unmount(&self.path);
    }
}

/// An ext4 filesystem in an image file, loop-mounted on a directory with `errors=remount-ro`:
/// the first filesystem error turns it read-only under every open file, as happens to a real
/// disk. Unmounted (and its loop device released) on drop.
pub struct Ext4 {
    image: PathBuf,
    path: PathBuf,
}

impl Ext4 {
    /// Makes an ext4 image of `bytes` at `image` and mounts it on `path` (created if missing).
    pub fn mount(image: &Path, path: &Path, bytes: u64) -> Ext4 {
        let file = std::fs::File::create(image).expect("create the ext4 image");
        file.set_len(bytes).expect("size the ext4 image");
        drop(file);
        run("mkfs.ext4", &["-q", "-F", &image.display().to_string()]);
        std::fs::create_dir_all(path).unwrap_or_else(|e| panic!("mkdir {}: {e}", path.display()));
        let fs = Ext4 {
            image: image.to_owned(),
            path: path.to_owned(),
        };
        fs.mount_image();
        fs
    }

    fn mount_image(&self) {
        // `-o loop` attaches a free loop device with autoclear: unmounting releases it.
        run(
            "mount",
            &[
                "-t",
                "ext4",
                "-o",
                "loop,errors=remount-ro",
                &self.image.display().to_string(),
                &self.path.display().to_string(),
            ],
        );
    }

    /// The block device (`loop3`) the filesystem is mounted from.
    fn device(&self) -> String {
        let mounts = std::fs::read_to_string("/proc/self/mounts").expect("read /proc/self/mounts");
        let target = self.path.display().to_string();
        mounts
            .lines()
            .filter_map(|line| {
                let mut fields = line.split(' ');
                Some((fields.next()?, fields.next()?))
            })
            .rfind(|(_, at)| *at == target)
            .and_then(|(source, _)| source.strip_prefix("/dev/"))
            .unwrap_or_else(|| panic!("{target} is not mounted from a device"))
            .to_owned()
    }

    /// Writes back everything written so far and commits the journal (syncfs). knid's commits
    /// end in sled's flush, a `sync_file_range` that commits no ext4 journal (sled fsyncs every
    /// second in the background): what a journal abort finds uncommitted is lost, as in a power
    /// cut (docs/architecture.md#persistence-the-sled-store).
    pub fn sync(&self) {
        let dir = std::fs::File::open(&self.path).expect("open the ext4 mount point");
        nix::unistd::syncfs(&dir).expect("syncfs");
    }

    /// Raises an ext4 error (the kernel's own test hook): the journal aborts and every later
    /// write, through files already open included, fails with EROFS.
    pub fn fail(&self) {
        let hook = format!("/sys/fs/ext4/{}/trigger_fs_error", self.device());
        std::fs::write(&hook, "knid fault test").unwrap_or_else(|e| panic!("write {hook}: {e}"));
    }

    /// Whether the kernel reports the filesystem read-only after an error.
    pub fn read_only(&self) -> bool {
        let mounts = std::fs::read_to_string("/proc/self/mounts").expect("read /proc/self/mounts");
        let target = self.path.display().to_string();
        mounts.lines().any(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            fields.get(1) == Some(&target.as_str())
                && fields
                    .get(3)
                    .is_some_and(|o| o.split(',').any(|o| o == "ro" || o == "emergency_ro"))
        })
    }

    /// What an operator does once the process holding the filesystem is gone: unmount, fsck,
    /// mount again (an ext4 that failed refuses `remount,rw`).
    pub fn repair(&self) {
        umount2(&self.path, MntFlags::empty())
            .unwrap_or_else(|e| panic!("umount {}: {e}", self.path.display()));
        let image = self.image.display().to_string();
        // Exit status 1: errors corrected.
        let status = Command::new("e2fsck")
            .args(["-f", "-y", &image])
            .output()
            .expect("run e2fsck (e2fsprogs)");
        assert!(
            matches!(status.status.code(), Some(0 | 1)),
            "e2fsck {image}: {}\n{}",
            status.status,
            String::from_utf8_lossy(&status.stdout)
        );
        self.mount_image();
    }
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        unmount(&self.path);
    }
}

/// Runs a tool to completion, panicking with its output if it fails.
fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {}: {}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What the store holds, once its invariants are checked.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct StoreSummary {
    /// `sandbox/ifname` and state of every attachment record.
    pub attachments: Vec<(String, AttachmentState)>,
    /// Sandbox records.
    pub sandboxes: usize,
    /// Address reservations, every network.
    pub reservations: usize,
}

/// Stops knid (gracefully), opens its store and checks "no record without its counterpart":
/// every attachment has its sandbox record and every sandbox record an attachment; every
/// reservation is owned by an attachment whose addresses contain it, and every address of an
/// attachment is reserved by it; every `kn*` host link (listed before the stop) belongs to an
/// attachment, and every Attached attachment's host link exists.
pub fn stop_and_check_store(node: &mut TestNode) -> StoreSummary {
    let links: BTreeSet<String> = node.host_kn_links().into_iter().map(|l| l.name).collect();
    let status = node.stop();
    assert_eq!(status.code(), Some(0), "knid exit status {status}");
    let store = node.open_store();
    let attachments = store
        .all_attachments()
        .and_then(|read| read.complete())
        .expect("read attachments");
    let sandboxes = store
        .sandboxes()
        .and_then(|read| read.complete())
        .expect("read sandboxes");
    let mut reservations = Vec::new();
    for network in store
        .networks_with_reservations()
        .expect("read networks with reservations")
    {
        reservations.extend(store.reservations(&network).expect("read reservations"));
    }
    drop(store);

    let key = |sandbox_id: &str, ifname: &str| format!("{sandbox_id}/{ifname}");
    let addresses_of = |att: &knid_store::AttachmentRecord| -> Vec<IpAddr> {
        att.ips
            .iter()
            .map(|ip| {
                ip.address
                    .parse::<IpNet>()
                    .expect("recorded address is a CIDR")
                    .addr()
            })
            .collect()
    };
    for att in &attachments {
        let name = key(&att.sandbox_id, &att.ifname);
        assert!(
            sandboxes.iter().any(|s| s.id == att.sandbox_id),
            "attachment {name} without its sandbox record"
        );
        for addr in addresses_of(att) {
            assert!(
                reservations.iter().any(|r| r.network == att.network
                    && r.addr == addr
                    && key(&r.owner.sandbox_id, &r.owner.ifname) == name),
                "address {addr} of {name} is not reserved by it: {reservations:?}"
            );
        }
        if att.state.enum_value_or_default() == AttachmentState::ATTACHED {
            assert!(
                links.contains(&att.host_ifname),
                "host link {} of attached {name} is missing: {links:?}",
                att.host_ifname
            );
        }
    }
    for sandbox in &sandboxes {
        assert!(
            attachments.iter().any(|a| a.sandbox_id == sandbox.id),
            "sandbox record {} without attachments",
            sandbox.id
        );
    }
    for r in &reservations {
        let owner = key(&r.owner.sandbox_id, &r.owner.ifname);
        let held = attachments.iter().any(|a| {
            key(&a.sandbox_id, &a.ifname) == owner
                && a.network == r.network
                && addresses_of(a).contains(&r.addr)
        });
        assert!(
            held,
            "reservation {} of {owner} has no attachment holding it",
            r.addr
        );
    }
    for link in &links {
        assert!(
            attachments.iter().any(|a| &a.host_ifname == link),
            "host link {link} belongs to no attachment"
        );
    }
    StoreSummary {
        attachments: attachments
            .iter()
            .map(|a| {
                (
                    key(&a.sandbox_id, &a.ifname),
                    a.state.enum_value_or_default(),
                )
            })
            .collect(),
        sandboxes: sandboxes.len(),
        reservations: reservations.len(),
    }
}
