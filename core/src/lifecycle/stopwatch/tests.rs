use super::*;

#[test]
fn phases_add_up_to_the_total_and_print_in_order() {
    let mut p = Stopwatch::start();
    std::thread::sleep(Duration::from_millis(2));
    p.end("first");
    p.split("waited", Duration::from_millis(1));
    std::thread::sleep(Duration::from_millis(2));
    p.end("second");
    let sum: Duration = p.done.iter().map(|(_, d)| *d).sum();
    assert_eq!(sum, p.last - p.started);
    assert_eq!(p.done[1], ("waited", Duration::from_millis(1)));
    assert!(p.done[2].1 >= Duration::from_millis(1), "{p}");
    let text = p.to_string();
    let names: Vec<&str> = text
        .split(['=', ','])
        .skip(1)
        .map(|part| part.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(names, ["first", "waited", "second"], "{text}");
}

#[test]
fn phases_keep_their_precision_past_a_millisecond() {
    let mut p = Stopwatch::start();
    p.split("kernel", Duration::from_micros(1_434));
    p.split("wait", Duration::from_nanos(170));
    let text = p.to_string();
    assert!(text.contains("kernel 1434.0µs"), "{text}");
    assert!(text.contains("wait 0.2µs"), "{text}");
}
