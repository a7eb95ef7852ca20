//! What the kernel tests that spawn Python share.

use std::process::{Command, Output};
use std::time::Duration;

/// Runs `cmd` and collects its output. These test binaries also load libtpu (other tests
/// compile with it on other threads), and a process spawned while libtpu compiles sometimes
/// fails to start with EFAULT ("Bad address"; seen in 2 of about 10 runs on 2 cores): the
/// spawn is retried, never the check it runs.
pub fn output(cmd: &mut Command) -> Output {
    let mut attempt = 0;
    loop {
        match cmd.output() {
            Ok(o) => return o,
            Err(e) if e.raw_os_error() == Some(libc_efault()) && attempt < 5 => {
                attempt += 1;
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(e) => panic!("runs python: {e}"),
        }
    }
}

/// EFAULT on Linux.
const fn libc_efault() -> i32 {
    14
}
