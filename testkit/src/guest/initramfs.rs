//! The guest's initramfs, built at test time: a newc cpio archive (the kernel's initramfs
//! format, written here: it is a header of hex fields per entry) holding busybox-static, the
//! kernel's virtio-net modules and an /init script that does the guest's whole job.

use std::fs;
use std::path::Path;

use super::error::GuestError;
use super::kernel::GuestKernel;

/// Where Debian's busybox-static puts its binary (the dynamic `busybox` package uses the same
/// path, so the binary is checked to be static).
const BUSYBOX: &str = "/bin/busybox";

/// /init: mounts, loads the modules, configures eth0 from the `knid_*` parameters of the kernel
/// command line, starts a TCP echo server, pings each peer until it answers (printing a
/// marker per first reply), then waits for a `poweroff` line on the echo server. Every line
/// it prints starts with `knid-guest:` so the test can tell them from the kernel's.
const INIT: &str = r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
# /dev/null at least: ash gives background jobs it as stdin, and a missing one kills the job.
mount -t devtmpfs devtmpfs /dev
say() { echo "knid-guest: $*"; }
fail() { say "FAIL $*"; poweroff -f; }
if grep -q knid_probe /proc/cmdline; then say PROBE; poweroff -f; fi
while read -r m; do insmod "/lib/modules/$m.ko" || fail "insmod $m"; done < /lib/modules/order
mtu=1500; port=7777; addrs=; routes=; arps=; peers=
for arg in $(cat /proc/cmdline); do
  case "$arg" in
    knid_mtu=*) mtu=${arg#*=} ;;
    knid_port=*) port=${arg#*=} ;;
    knid_addr=*) addrs="$addrs ${arg#*=}" ;;
    knid_route=*) routes="$routes ${arg#*=}" ;;
    knid_arp=*) arps="$arps ${arg#*=}" ;;
    knid_ping=*) peers="$peers ${arg#*=}" ;;
  esac
done
n=0
until [ -e /sys/class/net/eth0 ]; do
  n=$((n + 1)); [ $n -gt 300 ] && fail "no eth0"; sleep 0.1
done
# No duplicate address detection: the address is knid's to hand out, and a tentative address
# would hold the first IPv6 ping back.
echo 0 > /proc/sys/net/ipv6/conf/eth0/accept_dad
ip link set lo up
ip link set eth0 mtu "$mtu" up || fail "eth0 up"
rx=$(ls -d /sys/class/net/eth0/queues/rx-* | wc -l)
say "eth0 $(cat /sys/class/net/eth0/address) mtu $(cat /sys/class/net/eth0/mtu) rx-queues $rx"
for a in $addrs; do ip addr add "$a" dev eth0 || fail "address $a"; done
# dst,gateway (gateway empty for an on-link route). busybox's ip has no "onlink": a route to a
# gateway outside every subnet (routed networks') is preceded by knid's on-link route to it.
for r in $routes; do
  dst=${r%%,*}; gw=${r#*,}
  if [ -z "$gw" ]; then ip route add "$dst" dev eth0 || fail "route $r"
  else ip route add "$dst" via "$gw" dev eth0 || fail "route $r"; fi
done
# ip,mac: static IPv4 neighbours (busybox's ip cannot add neighbours; its arp can).
for e in $arps; do arp -i eth0 -s "${e%%,*}" "${e#*,}" || fail "neighbour $e"; done
nc -ll -p "$port" -e /bin/knid-echo &
# Listening before anyone is told: under TCG nc takes a while to start, and a connection
# before it listens is refused.
hexport=$(printf '%04X' "$port"); n=0
until cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | grep -q ":$hexport [0-9A-F]*:0000 0A"; do
  n=$((n + 1)); [ $n -gt 300 ] && fail "echo server not listening on $port"; sleep 0.1
done
say UP
for p in $peers; do
  n=0
  until ping -c 1 -W 1 "$p" > /dev/null 2>&1; do
    n=$((n + 1)); [ $n -gt 120 ] && fail "no reply from $p"; sleep 0.2
  done
  say "REPLY $p"
done
say READY
until [ -e /tmp/poweroff ]; do sleep 0.1; done
say DONE
poweroff -f
"#;

/// The echo server's handler (busybox nc runs it per connection, stdin and stdout on the
/// socket): answers one line with `guest <line>`; the line `poweroff` ends the guest; the line
/// `send <src> <dst>` makes the guest send three pings from address `<src>` (added to eth0
/// first when it is not the guest's: the tenant forging a source, as the guest's root can) to
/// `<dst>`, answering `guest sent <src>` (busybox's nc has no UDP; its ping takes a source).
const ECHO: &str = r#"#!/bin/busybox sh
read -r line
case "$line" in
  send\ *)
    set -- $line
    ip addr show dev eth0 | grep -q " $2/" || ip addr add "$2" dev eth0
    ping -c 3 -W 1 -I "$2" "$3" > /dev/null 2>&1
    echo "guest sent $2"
    ;;
  *) echo "guest $line" ;;
esac
if [ "$line" = poweroff ]; then touch /tmp/poweroff; fi
"#;

/// Writes the initramfs for `kernel` to `path`.
pub fn write(kernel: &GuestKernel, path: &Path) -> Result<(), GuestError> {
    let busybox = fs::read(BUSYBOX).map_err(|_| GuestError::MissingTool {
        tool: BUSYBOX,
        package: "busybox-static",
    })?;
    if is_dynamic_elf(&busybox) {
        return Err(GuestError::MissingTool {
            tool: "a static /bin/busybox",
            package: "busybox-static",
        });
    }
    let mut cpio = Newc::default();
    for dir in ["bin", "dev", "proc", "sys", "tmp", "lib", "lib/modules"] {
        cpio.entry(dir, S_IFDIR | 0o755, b"", (0, 0));
    }
    // The kernel opens /dev/console for init's stdio before anything could mount devtmpfs.
    cpio.entry("dev/console", S_IFCHR | 0o600, b"", (5, 1));
    cpio.entry("bin/busybox", S_IFREG | 0o755, &busybox, (0, 0));
    cpio.entry("init", S_IFREG | 0o755, INIT.as_bytes(), (0, 0));
    cpio.entry("bin/knid-echo", S_IFREG | 0o755, ECHO.as_bytes(), (0, 0));
    let mut order = String::new();
    for module in &kernel.modules {
        let name = module
            .file_stem()
            .and_then(|n| n.to_str())
            .ok_or_else(|| GuestError::Kernel(format!("odd module path {}", module.display())))?;
        let bytes = fs::read(module)
            .map_err(|e| GuestError::io(format!("read {}", module.display()), e))?;
        cpio.entry(
            &format!("lib/modules/{name}.ko"),
            S_IFREG | 0o644,
            &bytes,
            (0, 0),
        );
        order.push_str(name);
        order.push('\n');
    }
    cpio.entry(
        "lib/modules/order",
        S_IFREG | 0o644,
        order.as_bytes(),
        (0, 0),
    );
    fs::write(path, cpio.finish())
        .map_err(|e| GuestError::io(format!("write {}", path.display()), e))
}

/// Whether an ELF file asks for a program interpreter (PT_INTERP): a dynamic busybox would not
/// start in an initramfs without a libc.
fn is_dynamic_elf(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    let u16_at = |at: usize| {
        elf.get(at..at + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    };
    let u32_at = |at: usize| {
        elf.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |at: usize| {
        elf.get(at..at + 8).map(|b| {
            let mut a = [0; 8];
            a.copy_from_slice(b);
            u64::from_le_bytes(a)
        })
    };
    // ELF64 header: e_phoff at 0x20, e_phentsize at 0x36, e_phnum at 0x38.
    let (Some(phoff), Some(phentsize), Some(phnum)) = (u64_at(0x20), u16_at(0x36), u16_at(0x38))
    else {
        return false;
    };
    (0..usize::from(phnum)).any(|i| {
        usize::try_from(phoff)
            .ok()
            .and_then(|off| u32_at(off + i * usize::from(phentsize)))
            == Some(PT_INTERP)
    })
}

const S_IFDIR: u32 = 0o040_000;
const S_IFREG: u32 = 0o100_000;
const S_IFCHR: u32 = 0o020_000;

/// A newc ("070701") cpio archive being written: per entry a header of thirteen 8-digit hex
/// fields, the NUL-terminated name and the data, each padded to 4 bytes; a `TRAILER!!!` entry
/// ends it.
#[derive(Default)]
struct Newc {
    out: Vec<u8>,
    inode: u32,
}

impl Newc {
    fn entry(&mut self, name: &str, mode: u32, data: &[u8], rdev: (u32, u32)) {
        self.inode += 1;
        let fields = [
            self.inode,
            mode,
            0, // uid
            0, // gid
            if mode & S_IFDIR == S_IFDIR { 2 } else { 1 },
            0, // mtime
            u32::try_from(data.len()).unwrap_or(u32::MAX),
            0, // devmajor
            0, // devminor
            rdev.0,
            rdev.1,
            u32::try_from(name.len() + 1).unwrap_or(u32::MAX),
            0, // check
        ];
        self.out.extend_from_slice(b"070701");
        for field in fields {
            self.out
                .extend_from_slice(format!("{field:08x}").as_bytes());
        }
        self.out.extend_from_slice(name.as_bytes());
        self.out.push(0);
        self.pad();
        self.out.extend_from_slice(data);
        self.pad();
    }

    fn pad(&mut self) {
        while self.out.len() % 4 != 0 {
            self.out.push(0);
        }
    }

    fn finish(mut self) -> Vec<u8> {
        self.entry("TRAILER!!!", 0, b"", (0, 0));
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newc_entries_are_headed_named_and_padded() {
        let mut cpio = Newc::default();
        cpio.entry("init", S_IFREG | 0o755, b"abc", (0, 0));
        let out = cpio.finish();
        assert_eq!(&out[..6], b"070701");
        assert_eq!(&out[6..14], b"00000001", "inode");
        assert_eq!(&out[14..22], b"000081ed", "mode");
        assert_eq!(&out[54..62], b"00000003", "file size");
        assert_eq!(&out[94..102], b"00000005", "name size");
        assert_eq!(&out[110..115], b"init\0");
        // 110 + 5 bytes of header and name pad to 116; the data to 120.
        assert_eq!(&out[116..119], b"abc");
        assert_eq!(&out[120..126], b"070701");
        // 110 + 11 bytes of trailer header and name pad to 124.
        assert!(out.ends_with(b"TRAILER!!!\0\0\0\0"));
        assert_eq!(out.len() % 4, 0);
    }

    #[test]
    fn busybox_static_has_no_interpreter() {
        if let Ok(elf) = fs::read(BUSYBOX) {
            assert!(!is_dynamic_elf(&elf), "{BUSYBOX} is dynamic");
        }
        if let Ok(elf) = fs::read("/bin/sh") {
            assert!(is_dynamic_elf(&elf), "/bin/sh is dynamic on Debian");
        }
    }
}
