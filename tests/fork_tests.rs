//! A process forked after its first Tessera call: PJRT's threads do not survive `fork`, so
//! the child used to block forever in `PJRT_Event_Await`. Now every PJRT use in the child is
//! a clean `RuntimeError::Forked` (as CUDA refuses a forked child), and the parent carries on.
//! Its own test binary with one test: `fork` copies only the calling thread, and no other
//! test may hold a lock at that moment.

use std::time::{Duration, Instant};
use tessera::runtime::{CompileOptions, DType, Device, HostTensor, RuntimeError};

const NEG: &str = "module @neg {\n  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {\n    %0 = stablehlo.negate %x : tensor<4xf32>\n    return %0 : tensor<4xf32>\n  }\n}";

/// In the child: 0 when every PJRT use fails with `Forked`, else the number of the first
/// check that did not.
fn child_checks(
    device: &Device,
    exe: &tessera::runtime::Executable,
    input: &tessera::runtime::Buffer,
    output: &tessera::runtime::Buffer,
) -> i32 {
    let forked = |r: Result<(), RuntimeError>| match r {
        Err(e @ RuntimeError::Forked { .. }) => {
            let msg = e.to_string();
            msg.contains("forked subprocess") && msg.contains("spawn")
        }
        other => {
            eprintln!("child: expected a Forked error, got {other:?}");
            false
        }
    };
    let client = device.client().expect("the parent's client");
    let x = HostTensor::from_f64(DType::F32, vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let checks: [(i32, Box<dyn Fn() -> Result<(), RuntimeError>>); 7] = [
        (1, Box::new(|| output.to_host().map(drop))),
        (2, Box::new(|| output.block_until_ready())),
        (3, Box::new(|| exe.execute(&[input]).map(drop))),
        (4, Box::new(|| client.upload(&x).map(drop))),
        (
            5,
            Box::new(|| client.compile(NEG, &CompileOptions::default()).map(drop)),
        ),
        (6, Box::new(|| Device::cpu().map(drop))),
        (
            7,
            Box::new(|| {
                client
                    .compile_cached(NEG, &CompileOptions::default())
                    .and_then(|e| e.execute(&[input]))
                    .map(drop)
            }),
        ),
    ];
    for (code, check) in checks.iter() {
        if !forked(check()) {
            return *code;
        }
    }
    0
}

#[test]
fn pjrt_use_in_a_forked_child_is_a_clean_error_not_a_hang() {
    let device = Device::cpu().unwrap();
    let client = device.client().unwrap();
    let exe = client
        .compile_cached(NEG, &CompileOptions::default())
        .unwrap();
    let x = HostTensor::from_f64(DType::F32, vec![4], &[1.0, 2.0, 3.0, 4.0]);
    let input = client.upload(&x).unwrap();
    let output = exe.execute(&[&input]).unwrap().remove(0);

    // SAFETY: the child only runs Tessera calls that return at once, then `_exit`s without
    // running destructors or unwinding into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child_checks(&device, &exe, &input, &output);
        unsafe { libc::_exit(code) };
    }
    let start = Instant::now();
    let mut status = 0;
    loop {
        // SAFETY: waiting on our own child.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done == pid {
            break;
        }
        if start.elapsed() > Duration::from_secs(60) {
            unsafe { libc::kill(pid, libc::SIGKILL) };
            unsafe { libc::waitpid(pid, &mut status, 0) };
            panic!("the forked child hung (killed after 60 s)");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status),
        "child died of a signal: {status:#x}"
    );
    assert_eq!(
        libc::WEXITSTATUS(status),
        0,
        "check {} in the child did not fail with Forked",
        libc::WEXITSTATUS(status)
    );
    // The parent's client still works.
    let got = output.to_host().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(got, vec![-1.0, -2.0, -3.0, -4.0]);
    let again = exe.execute(&[&input]).unwrap()[0].to_host().unwrap();
    assert_eq!(again.to_vec::<f32>().unwrap(), got);
}
