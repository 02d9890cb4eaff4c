use super::*;

#[test]
fn metric_families_keep_whole_families_by_prefix() {
    let text = "# HELP knid_sandboxes Sandboxes.\n# TYPE knid_sandboxes gauge\nknid_sandboxes 3\n\
                # HELP knid_ipam_used_addresses Used.\n# TYPE knid_ipam_used_addresses gauge\n\
                knid_ipam_used_addresses{family=\"ipv4\",network=\"default\"} 2\n";
    assert_eq!(metric_families(text, None), text);
    assert_eq!(
        metric_families(text, Some("knid_ipam")),
        "# HELP knid_ipam_used_addresses Used.\n# TYPE knid_ipam_used_addresses gauge\n\
         knid_ipam_used_addresses{family=\"ipv4\",network=\"default\"} 2\n"
    );
    assert_eq!(metric_families(text, Some("nothing")), "");
}
