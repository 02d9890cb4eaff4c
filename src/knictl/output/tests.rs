use super::*;

#[test]
fn table_aligns_columns_and_trims_the_last() {
    let mut t = Table::new(&["ID", "STATE"]);
    t.row(vec!["pod-long-name".to_owned(), "attached".to_owned()]);
    t.row(vec!["p".to_owned(), String::new()]);
    assert_eq!(
        t.render(),
        "ID             STATE\npod-long-name  attached\np\n"
    );
}

#[test]
fn time_prints_utc_and_never_as_a_dash() {
    assert_eq!(time(0), "-");
    assert_eq!(time(1_700_000_000_123), "2023-11-14T22:13:20Z");
    assert_eq!(time(951_782_400_000), "2000-02-29T00:00:00Z");
}

#[test]
fn percent_rounds_down_to_a_tenth() {
    assert_eq!(percent(28, 29), 96.5);
    assert_eq!(percent(0, 0), 0.0);
    assert_eq!(percent(29, 29), 100.0);
}
