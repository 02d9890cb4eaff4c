use super::*;

#[test]
fn each_step_is_the_request_of_its_single_call() {
    let net: IpNet = "10.1.2.3/24".parse().expect("cidr");
    let (msg, flags, op) = Step::Address { index: 7, net }.request();
    assert_eq!(
        msg,
        RouteNetlinkMessage::NewAddress(address::add_message(7, net))
    );
    assert_eq!((flags, op), (NLM_F_CREATE | NLM_F_EXCL, "add address"));
    let (msg, flags, op) = Step::Up(3).request();
    assert_eq!(
        msg,
        RouteNetlinkMessage::SetLink(link::set_up_message(3, true))
    );
    assert_eq!((flags, op), (0, "set up"));
    let route = Route::default_via("10.1.2.1".parse().expect("ip"), 7);
    let (msg, flags, _) = Step::Route(route.clone()).request();
    assert_eq!(
        msg,
        RouteNetlinkMessage::NewRoute(crate::route::add_message(&route))
    );
    assert_eq!(flags, NLM_F_CREATE | NLM_F_REPLACE);
}
