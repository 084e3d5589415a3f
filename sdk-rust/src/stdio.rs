//! Claiming the protocol streams so ordinary output cannot corrupt them.

use std::io::{Read, Write};

/// Returns the protocol input and output.
///
/// Unix: duplicates fds 0 and 1 to private close-on-exec descriptors, then
/// points fd 1 at stderr and fd 0 at `/dev/null`. After this, `println!`,
/// raw writes to fd 1 and inherited child stdio go to diagnostics instead of
/// the protocol. If duplication fails the standard handles are used as is.
#[cfg(unix)]
pub(crate) fn claim() -> (Box<dyn Read>, Box<dyn Write>) {
    use std::fs::File;
    use std::os::fd::{AsFd, AsRawFd};

    let _ = std::io::stdout().flush();
    let out = std::io::stdout().as_fd().try_clone_to_owned();
    let inp = std::io::stdin().as_fd().try_clone_to_owned();
    match (inp, out) {
        (Ok(inp), Ok(out)) => {
            // SAFETY: dup2 on descriptors this process owns; failure leaves
            // the original descriptor in place, which is still correct for
            // the protocol (we already hold private duplicates).
            unsafe {
                libc::dup2(2, 1);
            }
            if let Ok(null) = File::open("/dev/null") {
                // SAFETY: as above.
                unsafe {
                    libc::dup2(null.as_raw_fd(), 0);
                }
            }
            (Box::new(File::from(inp)), Box::new(File::from(out)))
        }
        _ => (Box::new(std::io::stdin()), Box::new(std::io::stdout())),
    }
}

/// Other targets (wasm32-wasip1): descriptors cannot be duplicated, so fd 1
/// remains the protocol stream. Write diagnostics with `eprintln!` only.
#[cfg(not(unix))]
pub(crate) fn claim() -> (Box<dyn Read>, Box<dyn Write>) {
    (Box::new(std::io::stdin()), Box::new(std::io::stdout()))
}
