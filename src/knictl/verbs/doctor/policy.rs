//! doctor's checks of NetworkPolicy (cluster mode): the kernel's policy table against what
//! knid installed, whether every watched kind is listed, policies knid cannot enforce, and
//! whether this kernel hands bridged traffic to nftables at all (br_netfilter).

use std::path::Path;
use std::time::Duration;

use knid_transport::client::{ClientError, RuntimeClient};
use knid_transport::pb;

use super::Finding;

const CHECK: &str = "policy";

/// NetworkPolicy's findings; none when cluster mode is off, one line when policy is.
pub fn policy(
    client: &RuntimeClient,
    status: &pb::StatusResponse,
    timeout: Duration,
    out: &mut Vec<Finding>,
) {
    if status.cluster.is_none() {
        return;
    }
    let listing = match client.list_policies(&pb::ListPoliciesRequest::default(), timeout) {
        Ok(listing) => listing,
        Err(ClientError::Rpc {
            code: ttrpc::Code::UNAVAILABLE,
            message,
        }) => {
            out.push(Finding::ok(CHECK, format!("not enforced here: {message}")));
            return;
        }
        Err(e) => {
            out.push(Finding::fail(
                CHECK,
                format!("ListPolicies failed: {}", crate::exit::message(&e)),
                vec!["see knid's log".to_owned()],
            ));
            return;
        }
    };
    let table = "nft list table inet knid-policy".to_owned();
    let detail = listing.kernel_detail.as_str();
    out.push(match listing.kernel.enum_value_or_default() {
        pb::PolicyTableCheck::MATCHES => Finding::ok(
            CHECK,
            format!(
                "the kernel's table holds what knid installed ({} policies, {} namespaces, {} \
                 pods known)",
                listing.policies_known, listing.namespaces_known, listing.pods_known
            ),
        ),
        pb::PolicyTableCheck::NOT_INSTALLED => Finding::warn(
            CHECK,
            "no policy table installed yet: the NetworkPolicies, Namespaces or Pods are not all \
             listed since knid started"
                .to_owned(),
            vec![
                "check the API server and the ClusterRole (list/watch networkpolicies, \
                  namespaces, pods)"
                    .to_owned(),
            ],
        ),
        pb::PolicyTableCheck::DIFFERS => Finding::fail(
            CHECK,
            format!("the kernel's policy table differs from knid's: {detail}"),
            vec![
                "knid puts its table back within 30 s; if it stays different, see knid's log"
                    .to_owned(),
                table.clone(),
            ],
        ),
        _ => Finding::warn(
            CHECK,
            format!("the kernel's policy table could not be read: {detail}"),
            vec![table.clone()],
        ),
    });
    if !listing.synced
        && listing.kernel.enum_value_or_default() != pb::PolicyTableCheck::NOT_INSTALLED
    {
        out.push(Finding::warn(
            CHECK,
            "not every kind is listed since knid started: the table enforces the objects \
             recorded before"
                .to_owned(),
            vec![
                "check the API server and the ClusterRole (list/watch networkpolicies, \
                  namespaces, pods)"
                    .to_owned(),
            ],
        ));
    }
    if !listing.error.is_empty() {
        out.push(Finding::fail(
            CHECK,
            format!(
                "the last change of the policy table failed: {}",
                listing.error
            ),
            vec!["see knid's log".to_owned(), table],
        ));
    }
    for refused in &listing.refused {
        let name = refused
            .policy
            .as_ref()
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .unwrap_or_default();
        out.push(Finding::warn(
            CHECK,
            format!("NetworkPolicy {name} is not enforced: {}", refused.reason),
            vec![format!(
                "kubectl get networkpolicy -n {}",
                name.split('/').next().unwrap_or_default()
            )],
        ));
    }
    if listing.policies_known > 0 && !Path::new("/proc/sys/net/bridge").exists() {
        out.push(Finding::warn(
            CHECK,
            "br_netfilter is not loaded: pods on one bridge are not isolated from each other"
                .to_owned(),
            vec!["modprobe br_netfilter (and add it to /etc/modules-load.d/)".to_owned()],
        ));
    }
}
