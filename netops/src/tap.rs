//! Persistent tap devices for VM sandboxes (the Kata "tcfilter" model: the VMM opens the tap,
//! tc redirects frames between it and the pod's veth).
//!
//! Taps are created with ioctls on /dev/net/tun: rtnetlink cannot create them (tun's newlink
//! answers EOPNOTSUPP). A tap lands in the network namespace of the thread that *opens*
//! /dev/net/tun, so the foreign-namespace variants open it on a [`run_in`] thread.
//!
//! Taps are inspected through rtnetlink (tun's IFLA_INFO_DATA, Linux 4.15+), not sysfs:
//! /sys/class/net shows the namespace of whoever mounted /sys, so from a pod namespace it shows
//! the host's devices, possibly a different device of the same name. TUNGETIFF would need the
//! fd attached to the tap, which fails with EBUSY while a VMM holds a single-queue tap.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;

use netlink_packet_core::Nla;
use netlink_packet_route::link::{InfoData, InfoKind, InfoTun, LinkAttribute, LinkInfo};
use netlink_packet_route::RouteNetlinkMessage;

use crate::error::{Error, Result};
use crate::link::get_by_name_message;
use crate::netns::{run_in, NetnsHandle};
use crate::rtnl::Rtnl;

const TUN_PATH: &str = "/dev/net/tun";
const VHOST_NET_PATH: &str = "/dev/vhost-net";

// linux/if_tun.h flag bits, as TUNSETIFF takes them and /sys/class/net/<name>/tun_flags shows
// them. All fit the 16-bit ifr_flags.
const IFF_TUN: u16 = 0x0001;
const IFF_TAP: u16 = 0x0002;
const IFF_MULTI_QUEUE: u16 = 0x0100;
const IFF_PERSIST: u16 = 0x0800;
const IFF_NO_PI: u16 = 0x1000;
const IFF_VNET_HDR: u16 = 0x4000;
/// Fail with EBUSY instead of attaching when the name is taken.
const IFF_TUN_EXCL: u16 = 0x8000;
/// The bits TUNSETIFF overwrites on every attach (the kernel's TUN_FEATURES we use).
const FEATURES: u16 = IFF_NO_PI | IFF_VNET_HDR | IFF_MULTI_QUEUE;

// IFLA_TUN_* (linux/if_link.h): the IFLA_INFO_DATA of a "tun" link.
const IFLA_TUN_OWNER: u16 = 1;
const IFLA_TUN_GROUP: u16 = 2;
const IFLA_TUN_TYPE: u16 = 3;
const IFLA_TUN_PI: u16 = 4;
const IFLA_TUN_VNET_HDR: u16 = 5;
const IFLA_TUN_PERSIST: u16 = 6;
const IFLA_TUN_MULTI_QUEUE: u16 = 7;
const IFLA_TUN_NUM_QUEUES: u16 = 8;

/// A persistent tap to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapSpec {
    /// Interface name (1 to 15 bytes, no `/`, `:`, `%` or whitespace).
    pub name: String,
    /// IFF_MULTI_QUEUE: the VMM opens one fd per queue pair.
    pub multi_queue: bool,
    /// IFF_VNET_HDR: every frame read or written carries a virtio_net_hdr prefix.
    pub vnet_hdr: bool,
    /// IFF_NO_PI: no 4-byte packet-information prefix.
    pub no_pi: bool,
    /// Uid allowed to attach without CAP_NET_ADMIN (TUNSETOWNER); left as is when `None`.
    pub owner: Option<u32>,
    /// Gid allowed to attach without CAP_NET_ADMIN (TUNSETGROUP); left as is when `None`.
    pub group: Option<u32>,
}

impl TapSpec {
    /// The TUNSETIFF flags this spec asks for (IFF_TAP and its features, without IFF_PERSIST).
    fn flags(&self) -> u16 {
        let mut flags = IFF_TAP;
        for (on, bit) in [
            (self.multi_queue, IFF_MULTI_QUEUE),
            (self.vnet_hdr, IFF_VNET_HDR),
            (self.no_pi, IFF_NO_PI),
        ] {
            if on {
                flags |= bit;
            }
        }
        flags
    }
}

/// A tun or tap device as rtnetlink reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapState {
    /// Interface index.
    pub index: u32,
    /// The linux/if_tun.h IFF_* bits `/sys/class/net/<name>/tun_flags` would show: IFF_TUN or
    /// IFF_TAP, IFF_NO_PI, IFF_VNET_HDR, IFF_MULTI_QUEUE, IFF_PERSIST (all in the low 16 bits).
    /// rtnetlink does not report IFF_NAPI / IFF_NAPI_FRAGS; taps made here never have them.
    pub flags: u32,
    /// Owning uid (TUNSETOWNER), if one is set.
    pub owner: Option<u32>,
    /// Owning gid (TUNSETGROUP), if one is set.
    pub group: Option<u32>,
    /// Attached queues; the kernel reports them for multi-queue devices only.
    pub queues: Option<u32>,
}

/// What a name refers to.
enum Lookup {
    Absent,
    /// A link that is not a tun/tap, with its kind if it has one.
    Other(Option<String>),
    Tun(TapState),
}

impl Rtnl {
    /// The tun/tap device named `name`; `None` when there is no link of that name or it is not
    /// a tun/tap device.
    pub fn tap_by_name(&mut self, name: &str) -> Result<Option<TapState>> {
        Ok(match self.lookup_tap(name)? {
            Lookup::Tun(state) => Some(state),
            Lookup::Absent | Lookup::Other(_) => None,
        })
    }

    fn lookup_tap(&mut self, name: &str) -> Result<Lookup> {
        let msg = RouteNetlinkMessage::GetLink(get_by_name_message(name));
        match self.get(msg, "get link", &name) {
            Ok(RouteNetlinkMessage::NewLink(link)) => parse_tun_link(&link),
            Ok(_) => Err(Error::protocol("get link", "reply is not a link")),
            Err(e) if e.is_not_found() => Ok(Lookup::Absent),
            Err(e) => Err(e),
        }
    }
}

/// Creates a persistent tap (TUNSETIFF with IFF_TAP and the spec's features, TUNSETOWNER /
/// TUNSETGROUP when set, TUNSETPERSIST 1) in `ns`, or in the calling thread's namespace when
/// `None`.
///
/// Idempotent: an existing tap with the same features is accepted, its owner and group
/// re-applied where they differ. A device of that name that is not a tap, or a tap with other
/// features, is an error with EEXIST ([`Error::is_exists`]); it is left untouched.
pub fn create_persistent_tap(ns: Option<&NetnsHandle>, spec: &TapSpec) -> Result<()> {
    match ns {
        Some(ns) => run_in(ns, || create_here(spec))?,
        None => create_here(spec),
    }
}

/// Opens one queue of the existing tap `spec.name` the way a VMM does (TUNSETIFF with the same
/// flags; O_RDWR | O_CLOEXEC, plus O_NONBLOCK when `nonblocking`), in `ns` or in the calling
/// thread's namespace. The tap must exist with exactly the spec's features: attaching with
/// others would silently change them for every other queue.
pub fn open_tap_queue(
    ns: Option<&NetnsHandle>,
    spec: &TapSpec,
    nonblocking: bool,
) -> Result<OwnedFd> {
    match ns {
        Some(ns) => run_in(ns, || open_queue_here(spec, nonblocking))?,
        None => open_queue_here(spec, nonblocking),
    }
}

/// Attaches `tun`, a /dev/net/tun opened by someone else (a privileged helper passing the fd, as
/// libvirt does for QEMU), to a queue of the existing tap `spec.name` in the calling thread's
/// namespace. This is where the kernel checks the caller against the tap's owner and group:
/// EPERM for a caller that is neither and lacks CAP_NET_ADMIN.
pub fn attach_queue_fd(tun: File, spec: &TapSpec) -> Result<OwnedFd> {
    check_name(&spec.name)?;
    set_iff(tun, &spec.name, spec.flags())
}

/// Whether /dev/vhost-net exists and opens read-write. Never an error: `false` otherwise.
pub fn vhost_net_usable() -> bool {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(VHOST_NET_PATH)
        .is_ok()
}

/// Parses the text of `/sys/class/net/<name>/tun_flags` (`0x5802`, with or without a trailing
/// newline) into the IFF_* bits. Sysfs only shows the devices of the namespace it was mounted
/// in; for another namespace use [`tun_flags_in`].
pub fn parse_tun_flags(text: &str) -> Option<u32> {
    let hex = text.trim().strip_prefix("0x")?;
    u32::from_str_radix(hex, 16).ok()
}

/// The IFF_* bits of tun/tap `name` in `ns` (or the calling thread's namespace), as
/// `/sys/class/net/<name>/tun_flags` would show them there; read through rtnetlink, so it works
/// in any namespace without mounting sysfs or attaching to the device. No such tun/tap is an
/// error with ENODEV ([`Error::is_not_found`]).
pub fn tun_flags_in(ns: Option<&NetnsHandle>, name: &str) -> Result<u32> {
    let mut rtnl = match ns {
        Some(ns) => Rtnl::open_in(ns)?,
        None => Rtnl::open()?,
    };
    rtnl.tap_by_name(name)?
        .map(|t| t.flags)
        .ok_or_else(|| Error::io(format!("tun flags of {name}"), errno(libc::ENODEV)))
}

fn create_here(spec: &TapSpec) -> Result<()> {
    check_name(&spec.name)?;
    let mut rtnl = Rtnl::open()?;
    // A concurrent creator can take the name between lookup and TUNSETIFF: look once more.
    for _ in 0..2 {
        match rtnl.lookup_tap(&spec.name)? {
            Lookup::Absent => match create_new(spec) {
                Err(e) if e.errno() == Some(libc::EBUSY) => continue,
                other => return other,
            },
            Lookup::Other(kind) => {
                let kind = kind.unwrap_or_else(|| "device without a kind".into());
                return Err(exists(&spec.name, format!("it is a {kind}, not a tap")));
            }
            Lookup::Tun(state) => return reconcile(spec, &state),
        }
    }
    Err(exists(
        &spec.name,
        "the name was taken twice while creating it".into(),
    ))
}

/// Until TUNSETPERSIST the tap lives only as long as `tun`, so a failure in between removes it.
fn create_new(spec: &TapSpec) -> Result<()> {
    let tun = attach(&spec.name, spec.flags() | IFF_TUN_EXCL, false)?;
    apply_ownership(&tun, spec)?;
    make_persistent(&tun, &spec.name)
}

fn reconcile(spec: &TapSpec, state: &TapState) -> Result<()> {
    let have = state.flags as u16;
    if have & (IFF_TUN | IFF_TAP) != IFF_TAP {
        return Err(exists(&spec.name, "it is a tun device, not a tap".into()));
    }
    let want = spec.flags();
    if have & FEATURES != want & FEATURES {
        return Err(exists(
            &spec.name,
            format!(
                "it is a tap with tun_flags {:#06x}, not {:#06x}",
                have,
                want | IFF_PERSIST
            ),
        ));
    }
    let owner_ok = spec.owner.is_none_or(|o| state.owner == Some(o));
    let group_ok = spec.group.is_none_or(|g| state.group == Some(g));
    if have & IFF_PERSIST != 0 && owner_ok && group_ok {
        return Ok(());
    }
    let tun = attach(&spec.name, want, false).map_err(|e| match e.errno() {
        Some(libc::EBUSY) => Error::io(
            format!(
                "set owner/group of tap {}: its only queue is attached elsewhere",
                spec.name
            ),
            errno(libc::EBUSY),
        ),
        _ => e,
    })?;
    apply_ownership(&tun, spec)?;
    make_persistent(&tun, &spec.name)
}

fn open_queue_here(spec: &TapSpec, nonblocking: bool) -> Result<OwnedFd> {
    check_name(&spec.name)?;
    let context = || format!("open a queue of tap {}", spec.name);
    let state = match Rtnl::open()?.lookup_tap(&spec.name)? {
        Lookup::Tun(state) => state,
        Lookup::Absent | Lookup::Other(_) => return Err(Error::io(context(), errno(libc::ENODEV))),
    };
    let want = spec.flags();
    let have = state.flags as u16 & (IFF_TUN | IFF_TAP | FEATURES);
    if have != want {
        return Err(Error::io(
            format!(
                "{}: its flags are {have:#06x}, the spec's {want:#06x}",
                context()
            ),
            errno(libc::EINVAL),
        ));
    }
    attach(&spec.name, want, nonblocking)
}

/// Opens /dev/net/tun and attaches it to `name` with TUNSETIFF `flags` (which creates the tap,
/// non-persistent, when there is none and IFF_TUN_EXCL is not given).
fn attach(name: &str, flags: u16, nonblocking: bool) -> Result<OwnedFd> {
    let mut options = OpenOptions::new();
    options.read(true).write(true);
    if nonblocking {
        options.custom_flags(libc::O_NONBLOCK);
    }
    // std opens with O_CLOEXEC.
    let tun: File = options
        .open(TUN_PATH)
        .map_err(|e| Error::io(format!("open {TUN_PATH}"), e))?;
    set_iff(tun, name, flags)
}

/// TUNSETIFF on an open /dev/net/tun: the kernel checks the caller against the tap's owner and
/// group here, not at open.
fn set_iff(tun: File, name: &str, flags: u16) -> Result<OwnedFd> {
    let mut req = IfReq::new(name, flags);
    // SAFETY: `req` is a writable, `struct ifreq`-sized value that lives across the call (the
    // kernel reads it and writes the final name back), and `tun` keeps the fd open.
    unsafe { ioctl::tun_set_iff(tun.as_raw_fd(), &mut req) }
        .map_err(|e| Error::io(format!("TUNSETIFF {flags:#06x} on tap {name}"), e.into()))?;
    Ok(tun.into())
}

fn apply_ownership(tun: &OwnedFd, spec: &TapSpec) -> Result<()> {
    let name = &spec.name;
    if let Some(uid) = spec.owner {
        // The kernel reads the argument as a uid_t: reinterpreting the bits is lossless.
        // SAFETY: TUNSETOWNER takes its argument by value and `tun` keeps the fd open.
        unsafe { ioctl::tun_set_owner(tun.as_raw_fd(), uid as libc::c_int) }
            .map_err(|e| Error::io(format!("TUNSETOWNER {uid} on tap {name}"), e.into()))?;
    }
    if let Some(gid) = spec.group {
        // SAFETY: as for TUNSETOWNER; the argument is read as a gid_t.
        unsafe { ioctl::tun_set_group(tun.as_raw_fd(), gid as libc::c_int) }
            .map_err(|e| Error::io(format!("TUNSETGROUP {gid} on tap {name}"), e.into()))?;
    }
    Ok(())
}

fn make_persistent(tun: &OwnedFd, name: &str) -> Result<()> {
    // SAFETY: TUNSETPERSIST takes its argument by value and `tun` keeps the fd open.
    unsafe { ioctl::tun_set_persist(tun.as_raw_fd(), 1) }
        .map(drop)
        .map_err(|e| Error::io(format!("TUNSETPERSIST on tap {name}"), e.into()))
}

/// The kernel's dev_valid_name, minus what would be silently changed: a name of 16 bytes or more
/// would be cut at IFNAMSIZ, and a `%` makes it a template (`tap%d`) for a kernel-chosen name.
fn check_name(name: &str) -> Result<()> {
    let why = if name.is_empty() {
        "is empty"
    } else if name.len() >= libc::IFNAMSIZ {
        "is longer than 15 bytes"
    } else if name == "." || name == ".." {
        "is not a valid interface name"
    } else if name
        .bytes()
        .any(|b| matches!(b, b'/' | b':' | b'%' | 0) || b.is_ascii_whitespace())
    {
        "contains '/', ':', '%', NUL or whitespace"
    } else {
        return Ok(());
    };
    Err(Error::io(
        format!("tap name {name:?}"),
        io::Error::new(io::ErrorKind::InvalidInput, why),
    ))
}

fn exists(name: &str, detail: String) -> Error {
    Error::io(format!("create tap {name}: {detail}"), errno(libc::EEXIST))
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn parse_tun_link(link: &netlink_packet_route::link::LinkMessage) -> Result<Lookup> {
    let infos = link.attributes.iter().find_map(|a| match a {
        LinkAttribute::LinkInfo(infos) => Some(infos),
        _ => None,
    });
    let Some(infos) = infos else {
        return Ok(Lookup::Other(None));
    };
    let mut kind = None;
    let mut data = None;
    for info in infos {
        match info {
            LinkInfo::Kind(k) => kind = Some(k),
            LinkInfo::Data(InfoData::Tun(d)) => data = Some(d),
            _ => {}
        }
    }
    match (kind, data) {
        (Some(InfoKind::Tun), Some(data)) => Ok(Lookup::Tun(tap_state(link.header.index, data))),
        (Some(InfoKind::Tun), None) => Err(Error::protocol(
            "get link",
            "tun link without IFLA_INFO_DATA (needs Linux 4.15 or later)",
        )),
        (kind, _) => Ok(Lookup::Other(kind.map(ToString::to_string))),
    }
}

/// Rebuilds the tun_flags bits from tun's IFLA_INFO_DATA (drivers/net/tun.c, tun_fill_info).
fn tap_state(index: u32, data: &[InfoTun]) -> TapState {
    let mut state = TapState {
        index,
        flags: 0,
        owner: None,
        group: None,
        queues: None,
    };
    // IFLA_TUN_PI is "packet information on", the inverse of IFF_NO_PI; absent means on.
    let mut pi = true;
    for attr in data {
        // InfoTun is non-exhaustive; today every attribute arrives as Other.
        let InfoTun::Other(nla) = attr else { continue };
        let mut value = vec![0; nla.value_len()];
        nla.emit_value(&mut value);
        let u8_set = value.first().is_some_and(|v| *v != 0);
        let u32_value = value
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes);
        let mut set = |on: bool, bit: u16| {
            if on {
                state.flags |= u32::from(bit);
            }
        };
        match nla.kind() {
            IFLA_TUN_TYPE => {
                let kind = value.first().copied().map(u16::from).unwrap_or_default();
                set(true, kind & (IFF_TUN | IFF_TAP));
            }
            IFLA_TUN_PI => pi = u8_set,
            IFLA_TUN_VNET_HDR => set(u8_set, IFF_VNET_HDR),
            IFLA_TUN_PERSIST => set(u8_set, IFF_PERSIST),
            IFLA_TUN_MULTI_QUEUE => set(u8_set, IFF_MULTI_QUEUE),
            IFLA_TUN_OWNER => state.owner = u32_value,
            IFLA_TUN_GROUP => state.group = u32_value,
            IFLA_TUN_NUM_QUEUES => state.queues = u32_value,
            _ => {}
        }
    }
    if !pi {
        state.flags |= u32::from(IFF_NO_PI);
    }
    state
}

/// `struct ifreq` as TUNSETIFF uses it: the name, then `ifr_flags` at the start of the union.
#[repr(C)]
struct IfReq {
    name: [u8; libc::IFNAMSIZ],
    flags: u16,
    _rest_of_union: [u8; 22],
}

const _: () = assert!(std::mem::size_of::<IfReq>() == std::mem::size_of::<libc::ifreq>());

impl IfReq {
    /// `name` must have passed [`check_name`], so it fits with its NUL.
    fn new(name: &str, flags: u16) -> Self {
        let mut req = Self {
            name: [0; libc::IFNAMSIZ],
            flags,
            _rest_of_union: [0; 22],
        };
        let len = name.len().min(libc::IFNAMSIZ - 1);
        req.name[..len].copy_from_slice(&name.as_bytes()[..len]);
        req
    }
}

/// The tun ioctls (linux/if_tun.h). The request numbers come from libc.
mod ioctl {
    use super::IfReq;

    // Declared _IOW, but the kernel copies the ifreq back (with the final name): read-write.
    nix::ioctl_readwrite_bad!(tun_set_iff, libc::TUNSETIFF, IfReq);
    nix::ioctl_write_int_bad!(tun_set_persist, libc::TUNSETPERSIST);
    nix::ioctl_write_int_bad!(tun_set_owner, libc::TUNSETOWNER);
    nix::ioctl_write_int_bad!(tun_set_group, libc::TUNSETGROUP);
}

#[cfg(test)]
mod tests;
