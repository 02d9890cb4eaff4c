//! A real Linux guest under QEMU on a knid tap: Debian's kernel (downloaded, never installed;
//! [`kernel`]), an initramfs of busybox-static and the virtio-net modules built at test time
//! ([`initramfs`]), and QEMU started inside the netns that holds the tap, with KVM when
//! /dev/kvm can really run a guest, else TCG.
//!
//! The guest configures eth0 from knid's answer (passed on the kernel command line), runs a TCP
//! echo server on [`ECHO_PORT`], pings each peer it is given until one reply comes back and
//! prints a marker per peer on the serial console, which the test reads line by line with the
//! time since QEMU started: boot-to-first-reply is the time of the first such marker.

mod error;
mod initramfs;
mod kernel;

use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use knid_netops::{run_in, NetnsHandle};
use knid_transport::pb;

pub use error::GuestError;
pub use kernel::{GuestKernel, DEFAULT_CACHE};

use crate::dan::DanDevice;

/// The QEMU binary (Debian's qemu-system-x86).
pub const QEMU: &str = "qemu-system-x86_64";
/// The TCP port of the guest's echo server.
pub const ECHO_PORT: u16 = 7777;
/// How long a guest under KVM may take from QEMU's start to its last ping reply.
pub const KVM_BOOT: Duration = Duration::from_secs(60);
/// The same under TCG (emulated: seconds instead of a fraction of one, more on a busy machine).
pub const TCG_BOOT: Duration = Duration::from_secs(300);
/// How long the KVM probe guest may take to print its marker and power off.
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);
/// The prefix of every line the guest's /init prints.
const SAYS: &str = "knid-guest: ";

/// Everything a guest needs on this machine: QEMU, busybox-static and the cached kernel
/// The guest's kernel for a test, or `None` (a loud skip; a failure under `CI=true`) when this
/// machine cannot boot a guest or the test is not root.
pub fn kernel_for_test() -> Option<GuestKernel> {
    if !crate::privileged() {
        return None;
    }
    match prepare() {
        Ok(kernel) => Some(kernel),
        Err(e) => {
            crate::skip_unless_ci(&format!("needs a QEMU guest: {}", e.chain()));
            None
        }
    }
}

/// (fetched on first use; one fetch at a time in this process).
pub fn prepare() -> Result<GuestKernel, GuestError> {
    static FETCH: Mutex<()> = Mutex::new(());
    let qemu = Command::new(QEMU)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !qemu.is_ok_and(|s| s.success()) {
        return Err(GuestError::MissingTool {
            tool: QEMU,
            package: "qemu-system-x86",
        });
    }
    let _one = FETCH.lock().unwrap_or_else(|p| p.into_inner());
    GuestKernel::cached()
}

/// How QEMU runs the guest's CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation through /dev/kvm.
    Kvm,
    /// QEMU's emulator.
    Tcg,
}

impl Accel {
    /// KVM when a probe guest boots and powers off under it, else TCG; decided once per
    /// process. `KNID_GUEST_ACCEL=kvm|tcg` skips the probe. Opening /dev/kvm is not enough: a
    /// nested host can expose a /dev/kvm on which QEMU aborts setting up the vCPU or the guest
    /// hangs early in boot.
    pub fn for_guests(kernel: &GuestKernel) -> Accel {
        static CHOSEN: OnceLock<Accel> = OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let (accel, why) = match std::env::var("KNID_GUEST_ACCEL").as_deref() {
                Ok("kvm") => (Accel::Kvm, "KNID_GUEST_ACCEL=kvm".to_owned()),
                Ok("tcg") => (Accel::Tcg, "KNID_GUEST_ACCEL=tcg".to_owned()),
                _ => probe_kvm(kernel),
            };
            eprintln!("guest accelerator: {accel:?} ({why})");
            accel
        })
    }

    fn qemu_name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }

    /// How long a guest may take to boot and reach its peers.
    pub fn boot_timeout(self) -> Duration {
        match self {
            Accel::Kvm => KVM_BOOT,
            Accel::Tcg => TCG_BOOT,
        }
    }
}

/// Boots the guest with `knid_probe` (its /init powers off at once) under KVM.
fn probe_kvm(kernel: &GuestKernel) -> (Accel, String) {
    if let Err(e) = OpenOptions::new().read(true).write(true).open("/dev/kvm") {
        return (Accel::Tcg, format!("/dev/kvm: {e}"));
    }
    let dir = tempdir();
    let initrd = dir.path().join("initramfs.cpio");
    if let Err(e) = initramfs::write(kernel, &initrd) {
        return (Accel::Tcg, e.chain());
    }
    let mut qemu = qemu_command(Accel::Kvm, kernel, &initrd, "knid_probe", 1);
    let mut guest = Guest::spawn(&mut qemu, Accel::Kvm, dir);
    let ran = guest.wait_line("PROBE", PROBE_TIMEOUT).is_ok()
        && guest.try_exit(PROBE_TIMEOUT).is_some_and(|s| s.success());
    if ran {
        (Accel::Kvm, "a probe guest ran under KVM".to_owned())
    } else {
        let tail: Vec<String> = guest
            .console()
            .lines()
            .rev()
            .take(3)
            .map(str::to_owned)
            .collect();
        (
            Accel::Tcg,
            format!("a probe guest did not run under KVM: {tail:?}"),
        )
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("knid-e2e-guest-")
        .tempdir()
        .expect("create the guest's tempdir")
}

/// A route of the guest: to `dst`, via `gateway` or on-link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestRoute {
    /// Destination.
    pub dst: IpNet,
    /// Next hop; `None` for an on-link route.
    pub gateway: Option<IpAddr>,
}

/// The guest's eth0 as knid described it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestNic {
    /// MAC address (`aa:bb:cc:dd:ee:ff`), given to QEMU's virtio-net device.
    pub mac: String,
    /// MTU.
    pub mtu: u32,
    /// Addresses with their prefix lengths.
    pub addresses: Vec<IpNet>,
    /// Routes, in the order they must be added.
    pub routes: Vec<GuestRoute>,
    /// Static IPv4 neighbours (IP, MAC). busybox cannot add IPv6 ones, so those are left out.
    pub arp: Vec<(Ipv4Addr, String)>,
}

impl GuestNic {
    /// From an interface of knid's Attach answer.
    pub fn from_result(iface: &pb::InterfaceResult) -> GuestNic {
        let ip = |s: &str| -> IpAddr { s.parse().unwrap_or_else(|e| panic!("IP {s:?}: {e}")) };
        GuestNic {
            mac: iface.mac.clone(),
            mtu: iface.mtu,
            addresses: iface
                .ips
                .iter()
                .map(|a| a.address.parse().unwrap_or_else(|e| panic!("{a:?}: {e}")))
                .collect(),
            routes: iface
                .routes
                .iter()
                .map(|r| GuestRoute {
                    dst: r.dst.parse().unwrap_or_else(|e| panic!("{r:?}: {e}")),
                    gateway: (!r.gateway.is_empty()).then(|| ip(&r.gateway)),
                })
                .collect(),
            arp: iface
                .neighbors
                .iter()
                .filter_map(|n| match ip(&n.ip) {
                    IpAddr::V4(v4) => Some((v4, n.mac.clone())),
                    IpAddr::V6(_) => None,
                })
                .collect(),
        }
    }

    /// From a device of a Kata DAN file, the way Kata configures its guest from it.
    pub fn from_dan(dev: &DanDevice) -> GuestNic {
        let info = &dev.network_info;
        GuestNic {
            mac: dev.guest_mac.clone(),
            mtu: u32::try_from(info.interface.mtu).expect("MTU fits u32"),
            addresses: info
                .interface
                .ip_addresses
                .iter()
                .map(|a| {
                    a.parse()
                        .unwrap_or_else(|e| panic!("DAN address {a:?}: {e}"))
                })
                .collect(),
            routes: info
                .routes
                .iter()
                .map(|r| GuestRoute {
                    dst: r.dest.parse().unwrap_or_else(|e| panic!("{r:?}: {e}")),
                    gateway: (!r.gateway.is_empty())
                        .then(|| r.gateway.parse().unwrap_or_else(|e| panic!("{r:?}: {e}"))),
                })
                .collect(),
            arp: info
                .neighbors
                .iter()
                .filter_map(|n| {
                    let ip: IpNet = n.ip_address.as_deref()?.parse().ok()?;
                    match ip.addr() {
                        IpAddr::V4(v4) => Some((v4, n.hardware_addr.clone())),
                        IpAddr::V6(_) => None,
                    }
                })
                .collect(),
        }
    }

    /// The guest's first address of a family.
    pub fn address(&self, ipv6: bool) -> Option<IpAddr> {
        self.addresses
            .iter()
            .map(IpNet::addr)
            .find(|a| a.is_ipv6() == ipv6)
    }

    /// The `knid_*` parameters /init reads.
    fn cmdline(&self, ping: &[IpAddr]) -> String {
        let mut args = vec![
            format!("knid_mtu={}", self.mtu),
            format!("knid_port={ECHO_PORT}"),
        ];
        args.extend(self.addresses.iter().map(|a| format!("knid_addr={a}")));
        args.extend(self.routes.iter().map(|r| {
            let gateway = r.gateway.map(|g| g.to_string()).unwrap_or_default();
            format!("knid_route={},{gateway}", r.dst)
        }));
        args.extend(
            self.arp
                .iter()
                .map(|(ip, mac)| format!("knid_arp={ip},{mac}")),
        );
        args.extend(ping.iter().map(|p| format!("knid_ping={p}")));
        args.join(" ")
    }
}

/// Where and how one guest boots.
#[derive(Debug, Clone)]
pub struct GuestSpec<'a> {
    /// The netns holding the tap: QEMU runs there, since a tap is opened by name in the
    /// opener's netns.
    pub netns: &'a Path,
    /// The tap's name.
    pub tap: &'a str,
    /// Queue pairs of the tap (QEMU's `queues=`; multi-queue virtio-net above one).
    pub queue_pairs: u32,
    /// Whether QEMU may use vhost-net (knid's `vhost_net_ok`).
    pub vhost: bool,
    /// The guest's eth0.
    pub nic: &'a GuestNic,
    /// Peers the guest pings, in order, until each answers once.
    pub ping: &'a [IpAddr],
}

/// The serial console as read so far: lines with the time since QEMU started.
#[derive(Default)]
struct Console {
    lines: Mutex<(Vec<(Duration, String)>, bool)>,
    changed: Condvar,
}

impl Console {
    /// Reads `from` line by line until EOF; the stdout reader marks the console closed at its
    /// end.
    fn follow(
        self: Arc<Self>,
        from: impl Read + Send + 'static,
        started: Instant,
        prefix: &str,
        closes: bool,
    ) {
        let prefix = prefix.to_owned();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match reader.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf);
                        let line = format!("{prefix}{}", line.trim_end_matches(['\r', '\n']));
                        let mut state = self.lines.lock().unwrap_or_else(|p| p.into_inner());
                        state.0.push((started.elapsed(), line));
                        self.changed.notify_all();
                    }
                }
            }
            if closes {
                self.lines.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
                self.changed.notify_all();
            }
        });
    }
}

/// A QEMU process running a guest; killed (by its pid) on drop if still running.
pub struct Guest {
    child: Child,
    accel: Accel,
    console: Arc<Console>,
    exited: Option<ExitStatus>,
    // Holds the initramfs until QEMU is gone; dropped after `child` is reaped.
    _dir: tempfile::TempDir,
}

impl Guest {
    /// Starts QEMU for `spec` inside `spec.netns`. Panics if QEMU cannot be started.
    pub fn boot(kernel: &GuestKernel, spec: &GuestSpec<'_>) -> Guest {
        let accel = Accel::for_guests(kernel);
        let dir = tempdir();
        let initrd = dir.path().join("initramfs.cpio");
        initramfs::write(kernel, &initrd).unwrap_or_else(|e| panic!("initramfs: {}", e.chain()));
        let pairs = spec.queue_pairs.max(1);
        let mut qemu = qemu_command(accel, kernel, &initrd, &spec.nic.cmdline(spec.ping), pairs);
        let mut netdev = format!(
            "tap,id=n0,ifname={},script=no,downscript=no,vhost={}",
            spec.tap,
            if spec.vhost { "on" } else { "off" }
        );
        // romfile= (none): no iPXE option ROM, nothing to netboot.
        let mut device = format!("virtio-net-pci,netdev=n0,mac={},romfile=", spec.nic.mac);
        if pairs > 1 {
            netdev.push_str(&format!(",queues={pairs}"));
            // A vector per queue of each pair, one for config changes, one for the control
            // queue.
            device.push_str(&format!(",mq=on,vectors={}", 2 * pairs + 2));
        }
        qemu.args(["-netdev", &netdev, "-device", &device]);
        let ns = NetnsHandle::open(spec.netns)
            .unwrap_or_else(|e| panic!("open {}: {e}", spec.netns.display()));
        run_in(&ns, || Guest::spawn(&mut qemu, accel, dir)).expect("start QEMU in the tap's netns")
    }

    fn spawn(qemu: &mut Command, accel: Accel, dir: tempfile::TempDir) -> Guest {
        let started = Instant::now();
        let mut child = qemu
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {QEMU}: {e}"));
        let console = Arc::new(Console::default());
        let shown = format!("$ {qemu:?}");
        console
            .lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .push((Duration::ZERO, shown));
        let stdout = child.stdout.take().expect("QEMU stdout piped");
        let stderr = child.stderr.take().expect("QEMU stderr piped");
        Arc::clone(&console).follow(stdout, started, "", true);
        Arc::clone(&console).follow(stderr, started, "qemu: ", false);
        Guest {
            child,
            accel,
            console,
            exited: None,
            _dir: dir,
        }
    }

    /// The accelerator it runs under.
    pub fn accel(&self) -> Accel {
        self.accel
    }

    /// The console so far, with the time of each line.
    pub fn console(&self) -> String {
        let state = self.console.lines.lock().unwrap_or_else(|p| p.into_inner());
        state
            .0
            .iter()
            .map(|(at, line)| format!("[{:>8.3}s] {line}\n", at.as_secs_f64()))
            .collect()
    }

    /// Waits for the guest's line `knid-guest: <marker>…` and returns when it came (since
    /// QEMU's start) and the rest of the line. Errs at a `FAIL` line, at QEMU's end, or after
    /// `timeout`.
    fn wait_line(&self, marker: &str, timeout: Duration) -> Result<(Duration, String), String> {
        let want = format!("{SAYS}{marker}");
        let fail = format!("{SAYS}FAIL");
        let deadline = Instant::now() + timeout;
        let mut state = self.console.lines.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some((at, line)) = state.0.iter().find(|(_, l)| l.starts_with(&want)) {
                return Ok((*at, line[want.len()..].to_owned()));
            }
            if let Some((_, line)) = state.0.iter().find(|(_, l)| l.starts_with(&fail)) {
                return Err(format!("the guest failed: {line}"));
            }
            if state.1 {
                return Err("QEMU exited".to_owned());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("no {want:?} within {timeout:?}"));
            }
            state = self
                .console
                .changed
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Waits for the console line `knid-guest: <marker>…`; panics with the console if it does
    /// not come within the accelerator's boot timeout. Returns its time since QEMU's start and
    /// the rest of the line.
    pub fn expect_line(&self, marker: &str) -> (Duration, String) {
        self.wait_line(marker, self.accel.boot_timeout())
            .unwrap_or_else(|why| panic!("guest ({:?}): {why}\n{}", self.accel, self.console()))
    }

    /// Waits until the guest has had a reply from each peer it pings; returns the time of the
    /// first reply since QEMU's start: boot-to-first-reply.
    pub fn first_reply(&self, ping: &[IpAddr]) -> Duration {
        let first = ping
            .iter()
            .map(|p| self.expect_line(&format!("REPLY {p}")).0)
            .min()
            .expect("at least one peer to ping");
        self.expect_line("READY");
        first
    }

    /// Sends `line` to the guest's echo server at `guest` from a thread in the netns at `from`
    /// and returns the answer (without its newline). Panics with the console on failure.
    pub fn echo(&self, from: &Path, guest: IpAddr, line: &str) -> String {
        let ns = NetnsHandle::open(from).unwrap_or_else(|e| panic!("open {}: {e}", from.display()));
        let addr = SocketAddr::new(guest, ECHO_PORT);
        let exchange = || -> std::io::Result<String> {
            let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(20))?;
            stream.set_read_timeout(Some(Duration::from_secs(20)))?;
            stream.write_all(format!("{line}\n").as_bytes())?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer)?;
            Ok(answer.trim_end().to_owned())
        };
        run_in(&ns, exchange)
            .expect("enter the client netns")
            .unwrap_or_else(|e| {
                panic!(
                    "echo {line:?} to {addr} from {}: {e}\n{}",
                    from.display(),
                    self.console()
                )
            })
    }

    /// Has the guest send three pings from `src` (its own address, or one it forges) to `dst`,
    /// asked through its echo server (from the netns at `from`, at the guest's address `guest`);
    /// returns once they are sent.
    pub fn send_from(&self, from: &Path, guest: IpAddr, src: IpAddr, dst: IpAddr) {
        let answer = self.echo(from, guest, &format!("send {src} {dst}"));
        assert_eq!(answer, format!("guest sent {src}"), "{}", self.console());
    }

    /// Asks the guest to power off (the `poweroff` line to its echo server, from the netns at
    /// `from`) and waits for QEMU's clean exit; panics with the console otherwise.
    pub fn power_off(&mut self, from: &Path, guest: IpAddr) {
        let answer = self.echo(from, guest, "poweroff");
        assert_eq!(answer, "guest poweroff", "{}", self.console());
        let timeout = self.accel.boot_timeout();
        match self.try_exit(timeout) {
            Some(status) if status.success() => {}
            Some(status) => panic!("QEMU exited with {status}\n{}", self.console()),
            None => panic!(
                "QEMU still running {timeout:?} after poweroff\n{}",
                self.console()
            ),
        }
    }

    /// QEMU's exit status if it exits within `timeout`.
    fn try_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exited {
                return Some(status);
            }
            self.exited = self.child.try_wait().expect("wait for QEMU");
            if self.exited.is_none() {
                if Instant::now() >= deadline {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

impl Drop for Guest {
    fn drop(&mut self) {
        if self.exited.is_none() && matches!(self.child.try_wait(), Ok(None)) {
            // Child::kill signals this child's pid only.
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// QEMU for a guest booting `kernel` with `initrd` and the extra kernel parameters `params`,
/// its console on stdout, no devices but those added after, no reboot (a panic ends QEMU).
fn qemu_command(
    accel: Accel,
    kernel: &GuestKernel,
    initrd: &Path,
    params: &str,
    cpus: u32,
) -> Command {
    let mut qemu = Command::new(QEMU);
    qemu.args(["-machine", "pc", "-accel", accel.qemu_name(), "-cpu", "max"])
        .args(["-smp", &cpus.clamp(1, 2).to_string(), "-m", "256M"])
        .args(["-nodefaults", "-no-user-config", "-display", "none"])
        .args(["-serial", "stdio", "-no-reboot"])
        .arg("-kernel")
        .arg(&kernel.vmlinuz)
        .arg("-initrd")
        .arg(initrd)
        .arg("-append")
        .arg(format!("console=ttyS0 panic=-1 loglevel=4 {params}"));
    qemu
}
