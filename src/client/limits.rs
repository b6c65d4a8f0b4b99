//! OS limits on the load generator: raise the open-file limit at start where
//! allowed, and refuse up front a concurrency the OS cannot hold, instead of
//! failing requests later with an obscure "Too many open files".

use anyhow::{bail, Result};

/// File descriptors kneecap needs besides one socket per stream (stdio,
/// runtime, listener of an embedded simulator, /metrics scraper, files).
const RESERVED_FDS: u64 = 64;

/// Raise the soft `RLIMIT_NOFILE` to the hard limit. Returns the soft limit
/// in force afterwards (`None` when it cannot be read).
#[allow(unsafe_code)]
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes into the struct we own and pass by pointer.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            // SAFETY: setrlimit reads the struct we pass; failure leaves the limit unchanged.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every platform
        Some(lim.rlim_cur as u64)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Fail with a clear message when `streams` concurrent streams (plus an
/// embedded simulator's own sockets) cannot fit under the open-file limit.
pub fn check_concurrency(
    streams: usize,
    sim_in_process: bool,
    soft_limit: Option<u64>,
) -> Result<()> {
    let Some(limit) = soft_limit else {
        return Ok(());
    };
    // An in-process simulator holds the server side of every stream too.
    let per_stream = if sim_in_process { 2 } else { 1 };
    let needed = streams as u64 * per_stream + RESERVED_FDS;
    if needed > limit {
        bail!(
            "--max-concurrency {streams} needs about {needed} open files but this process may open only {limit} \
             (ulimit -n); raise the limit (ulimit -n {needed}, or LimitNOFILE= for a service) or lower the concurrency"
        );
    }
    Ok(())
}

/// A clearer message for socket errors caused by the open-file limit (EMFILE/ENFILE).
pub fn explain_fd_exhaustion(e: &std::io::Error) -> Option<String> {
    match e.raw_os_error() {
        Some(code) if code == libc::EMFILE || code == libc::ENFILE => Some(format!(
            "{e}: the open-file limit (ulimit -n) is lower than the number of concurrent streams; raise it or lower the load"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn concurrency_beyond_the_open_file_limit_is_refused_with_the_fix() {
        let err = check_concurrency(5000, false, Some(1024))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--max-concurrency 5000") && err.contains("ulimit -n"),
            "{err}"
        );
        assert!(check_concurrency(900, false, Some(1024)).is_ok());
        assert!(
            check_concurrency(900, true, Some(1024)).is_err(),
            "an in-process sim doubles the sockets"
        );
        assert!(
            check_concurrency(1_000_000, false, None).is_ok(),
            "unknown limit: do not guess"
        );
    }

    #[test]
    fn the_limit_can_be_read_and_is_never_lowered() {
        let before = raise_open_file_limit().unwrap();
        let after = raise_open_file_limit().unwrap();
        assert!(after >= before);
    }

    #[test]
    fn fd_exhaustion_errors_get_an_explanation() {
        let e = std::io::Error::from_raw_os_error(libc::EMFILE);
        assert!(explain_fd_exhaustion(&e).unwrap().contains("ulimit -n"));
        assert!(explain_fd_exhaustion(&std::io::Error::other("x")).is_none());
    }
}
