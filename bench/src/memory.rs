//! The process's memory, as Linux reports it in `/proc/self/status`. Both figures cover the
//! whole benchmark process: bounda, the floors and the benchmark's own bookkeeping.

/// A `Vm*` line of `/proc/self/status` in KiB (`VmHWM`, the peak resident set; `VmRSS`, the
/// resident set now), or `None` where there is no such file.
pub fn status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_kib(&status, field)
}

/// The peak resident set so far, in KiB.
pub fn peak_kib() -> Option<u64> {
    status_kib("VmHWM")
}

/// Resets the peak resident set to the resident set now (Linux's `clear_refs` with 5), so the
/// next [`peak_kib`] is the peak of what runs in between; `false` where it cannot.
pub fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The resident set now, in KiB.
pub fn resident_kib() -> Option<u64> {
    status_kib("VmRSS")
}

/// Finds `field:   1234 kB` in `status`.
fn parse_kib(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_field_in_kib() {
        let status = "VmPeak:\t  20000 kB\nVmHWM:\t    8120 kB\nVmRSS:\t    7000 kB\n";
        assert_eq!(parse_kib(status, "VmHWM"), Some(8120));
        assert_eq!(parse_kib(status, "VmRSS"), Some(7000));
        assert_eq!(parse_kib(status, "VmSwap"), None);
    }

    #[test]
    fn this_process_has_a_peak_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(peak_kib().is_some_and(|kib| kib > 0));
        }
    }
}
