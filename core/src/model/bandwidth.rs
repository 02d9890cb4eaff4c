//! Bandwidth limits of an interface, as the CNI `bandwidth` capability and Kubernetes'
//! `kubernetes.io/ingress-bandwidth` / `egress-bandwidth` pod annotations mean them: ingress is
//! what the pod receives, egress what it sends; rates in bits per second, bursts in bits.

use super::validate::Invalid;

/// The pod annotation limiting what a pod receives (a Kubernetes quantity such as `10M`).
pub const INGRESS_ANNOTATION: &str = "kubernetes.io/ingress-bandwidth";
/// The pod annotation limiting what a pod sends.
pub const EGRESS_ANNOTATION: &str = "kubernetes.io/egress-bandwidth";
/// The burst a limit from an annotation gets, in bits: the annotations name no burst, and this
/// is what the kubelet's dockershim passed to the CNI `bandwidth` plugin (`math.MaxInt32`, "in
/// practice no limit"). containerd passes `math.MaxUint32`; knid-cni takes what it is given.
pub const ANNOTATION_BURST: u64 = i32::MAX as u64;
/// Slowest rate accepted, in bits/s: the kubelet's floor for the annotations (1k).
pub const MIN_RATE: u64 = 1_000;
/// Fastest rate accepted, in bits/s: the kubelet's ceiling for the annotations (1P).
pub const MAX_RATE: u64 = 1_000_000_000_000_000;
/// Largest burst, in bits: the kernel takes a tbf's burst in bytes as a u32.
pub const MAX_BURST: u64 = u32::MAX as u64 * 8;
/// Smallest burst given to a rate asked for without one, in bits (64 KiB: a whole GSO frame).
const MIN_DEFAULT_BURST: u64 = 64 * 1024 * 8;

/// One direction's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Bits per second.
    pub rate: u64,
    /// Bits that may pass at line rate after a pause (the token bucket's size).
    pub burst: u64,
}

impl RateLimit {
    /// The burst a rate asked for without one gets: 100 ms at the rate, at least 64 KiB.
    pub fn default_burst(rate: u64) -> u64 {
        (rate / 10).clamp(MIN_DEFAULT_BURST, MAX_BURST)
    }
}

/// The limits of one interface; a direction without one is unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Bandwidth {
    /// Traffic into the pod (shaped on the host link's egress).
    pub ingress: Option<RateLimit>,
    /// Traffic out of the pod (shaped on the host link's ingress, through an IFB).
    pub egress: Option<RateLimit>,
}

impl Bandwidth {
    /// Limits from rates and bursts as the API and the CNI capability carry them (0 = not
    /// set). A burst of 0 beside a rate is [`RateLimit::default_burst`]; `None` when neither
    /// direction has a rate. The error names the field (`ingress_rate`, `egress_burst`, …).
    pub fn from_bits(
        ingress_rate: u64,
        ingress_burst: u64,
        egress_rate: u64,
        egress_burst: u64,
    ) -> Result<Option<Bandwidth>, (&'static str, Invalid)> {
        let out = Bandwidth {
            ingress: limit(ingress_rate, ingress_burst, "ingress_rate", "ingress_burst")?,
            egress: limit(egress_rate, egress_burst, "egress_rate", "egress_burst")?,
        };
        Ok((out.ingress.is_some() || out.egress.is_some()).then_some(out))
    }

    /// Limits from a pod's `kubernetes.io/ingress-bandwidth` and `egress-bandwidth`
    /// annotations (`value` looks one up), each with [`ANNOTATION_BURST`]. The error names the
    /// annotation.
    pub fn from_annotations<'a>(
        value: impl Fn(&str) -> Option<&'a str>,
    ) -> Result<Option<Bandwidth>, (&'static str, Invalid)> {
        let rate = |key: &'static str| -> Result<u64, (&'static str, Invalid)> {
            match value(key) {
                None => Ok(0),
                Some(text) => {
                    let rate = parse_quantity(text).map_err(|e| (key, e))?;
                    check_rate(rate).map_err(|e| (key, e))?;
                    Ok(rate)
                }
            }
        };
        let (ingress, egress) = (rate(INGRESS_ANNOTATION)?, rate(EGRESS_ANNOTATION)?);
        let burst = |rate: u64| if rate == 0 { 0 } else { ANNOTATION_BURST };
        let checked = Bandwidth::from_bits(ingress, burst(ingress), egress, burst(egress));
        // The rates were checked above and the burst is fixed: nothing else can be refused.
        checked.map_err(|(_, e)| (INGRESS_ANNOTATION, e))
    }
}

fn limit(
    rate: u64,
    burst: u64,
    rate_field: &'static str,
    burst_field: &'static str,
) -> Result<Option<RateLimit>, (&'static str, Invalid)> {
    if rate == 0 {
        if burst != 0 {
            return Err((
                burst_field,
                Invalid::new(format!("must be 0 without {rate_field}")),
            ));
        }
        return Ok(None);
    }
    check_rate(rate).map_err(|e| (rate_field, e))?;
    if burst > MAX_BURST {
        return Err((
            burst_field,
            Invalid::new(format!("must be at most {MAX_BURST} bits (4 GiB)")),
        ));
    }
    let burst = if burst == 0 {
        RateLimit::default_burst(rate)
    } else {
        burst
    };
    Ok(Some(RateLimit { rate, burst }))
}

fn check_rate(rate: u64) -> Result<(), Invalid> {
    if !(MIN_RATE..=MAX_RATE).contains(&rate) {
        return Err(Invalid::new(format!(
            "must be {MIN_RATE}-{MAX_RATE} bits per second (1k-1P)"
        )));
    }
    Ok(())
}

/// Parses a Kubernetes resource quantity as a whole number, rounded up as the kubelet's
/// `Quantity.Value()` does: digits with an optional fraction, then an optional suffix — decimal
/// `k`, `M`, `G`, `T`, `P`, `E` or binary `Ki`, `Mi`, `Gi`, `Ti`, `Pi`, `Ei` — or an exponent
/// (`1e6`). `10M` is 10,000,000; `1Mi` is 1,048,576.
pub fn parse_quantity(text: &str) -> Result<u64, Invalid> {
    let bad = || {
        Invalid::new(format!(
            "must be a quantity such as 10M or 1Gi (k, M, G, T, P, E, Ki … Ei), not {text:?}"
        ))
    };
    let number_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(bad());
    }
    let multiplier: u128 = match suffix {
        "" => 1,
        "k" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        "P" => 1_000_000_000_000_000,
        "E" => 1_000_000_000_000_000_000,
        "Ki" => 1 << 10,
        "Mi" => 1 << 20,
        "Gi" => 1 << 30,
        "Ti" => 1 << 40,
        "Pi" => 1 << 50,
        "Ei" => 1 << 60,
        s if s.starts_with(['e', 'E']) => {
            let exp: u32 = s[1..].parse().map_err(|_| bad())?;
            if exp > 18 {
                return Err(bad());
            }
            10u128.pow(exp)
        }
        _ => return Err(bad()),
    };
    if whole.len() > 20 || fraction.len() > 18 {
        return Err(bad());
    }
    let digits = |s: &str| -> u128 { s.parse::<u128>().unwrap_or(0) };
    let scale = 10u128.pow(fraction.len() as u32);
    let exact = digits(whole)
        .checked_mul(scale)
        .and_then(|n| n.checked_add(digits(fraction)))
        .and_then(|n| n.checked_mul(multiplier))
        .ok_or_else(bad)?;
    let value = exact.div_ceil(scale);
    u64::try_from(value).map_err(|_| bad())
}

#[cfg(test)]
mod tests;
