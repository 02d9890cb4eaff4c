//! The knid-cni shim's input (environment lines, an empty line, stdin): reading it never
//! panics, an accepted invocation holds the CNI and knid rules for each variable and key, and a
//! refusal carries one of the spec codes for bad input (1, 4, 6, 7) and a message.
#![no_main]

use knid_core::cni::error::{DECODE, INCOMPATIBLE_VERSION, INVALID_CONFIG, INVALID_ENV};
use knid_core::cni::version::SUPPORTED;
use knid_fuzz::{is_ifname, is_name, is_sandbox_id};
use knid_transport::cni_plugin::{Attachment, Invocation, PluginConf};
use knid_transport::fuzz::cni_invocation;
use libfuzzer_sys::fuzz_target;

fn check_conf(conf: &PluginConf) {
    assert!(SUPPORTED.contains(&conf.version));
    assert!(is_name(&conf.network), "{conf:?}");
    assert!(conf.socket.is_absolute(), "{conf:?}");
    for m in &conf.runtime.port_mappings {
        assert!((1..=65535).contains(&m.host_port) && (1..=65535).contains(&m.container_port));
    }
    assert!(conf.runtime.ips.iter().all(|ip| !ip.contains('/')));
}

fn check_attachment(att: &Attachment, netns_required: bool) {
    assert!(is_sandbox_id(&att.container_id), "{att:?}");
    assert!(is_ifname(&att.ifname), "{att:?}");
    assert!(!netns_required || att.netns.is_some());
    assert!(att.netns.as_ref().is_none_or(|p| p.starts_with('/')));
}

fuzz_target!(|data: &[u8]| match cni_invocation(data) {
    Ok(Invocation::Add(conf, att)) | Ok(Invocation::Check(conf, att)) => {
        check_conf(&conf);
        check_attachment(&att, true);
    }
    Ok(Invocation::Del(conf, att)) => {
        check_conf(&conf);
        check_attachment(&att, false);
    }
    Ok(Invocation::Status(conf)) => check_conf(&conf),
    Ok(Invocation::Gc(conf)) => check_conf(&conf),
    Ok(Invocation::Version(_)) => {}
    Err(e) => {
        assert!(
            [INCOMPATIBLE_VERSION, INVALID_ENV, DECODE, INVALID_CONFIG].contains(&e.code),
            "{e}"
        );
        assert!(!e.msg.is_empty());
    }
});
