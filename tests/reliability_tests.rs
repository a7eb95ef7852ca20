//! The reproducers of issue 17, each run in its own `tessera` process (a crash or a hang
//! there cannot take this test runner down): every one must end, soon, with a clean error
//! and exit code 1: no signal, no abort, no panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `tessera args` with `env` changes (`None` removes a variable), killing it after
/// `limit` (a hang fails the test).
fn tessera_env(args: &[&str], env: &[(&str, Option<&str>)], limit: Duration) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tessera"));
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let mut child = cmd.spawn().expect("runs tessera");
    let start = Instant::now();
    while child.try_wait().expect("waits").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("reaps");
            panic!(
                "`tessera {}` hung (killed after {limit:?}); stderr: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collects output")
}

fn tessera(args: &[&str]) -> Output {
    tessera_env(args, &[], Duration::from_secs(120))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Exit code 1 (not a signal, not a panic's 101) and `want` in the message.
fn assert_clean_error(o: &Output, what: &str, want: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{what}: {:?}\n{err}", o.status);
    assert!(err.contains(want), "{what}: want `{want}` in:\n{err}");
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// A new empty directory and its path; it is removed when the [`tempfile::TempDir`] is
/// dropped (also when the test fails), so keep that alive while the path is used.
fn temp_dir(name: &str) -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::Builder::new()
        .prefix(&format!("tessera-rel-{name}-"))
        .tempdir()
        .unwrap();
    let dir = temp.path().to_path_buf();
    (temp, dir)
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let f = dir.join(name);
    std::fs::write(&f, text).unwrap();
    f.to_str().unwrap().to_string()
}

fn cpu_plugin() -> PathBuf {
    tessera::runtime::plugin_store::locate(tessera::runtime::DeviceKind::Cpu).expect("CPU plugin")
}

const OUTER_SUM: &str = r#"module @outer {
  func.func public @main(%a: tensor<100000x1xf32>, %b: tensor<1x100000xf32>) -> tensor<100000x100000xf32> {
    %x = stablehlo.broadcast_in_dim %a, dims = [0, 1] : (tensor<100000x1xf32>) -> tensor<100000x100000xf32>
    %y = stablehlo.broadcast_in_dim %b, dims = [0, 1] : (tensor<1x100000xf32>) -> tensor<100000x100000xf32>
    %0 = stablehlo.add %x, %y : tensor<100000x100000xf32>
    return %0 : tensor<100000x100000xf32>
  }
}"#;

#[test]
fn outputs_and_inputs_larger_than_memory_are_errors_not_aborts() {
    let (_dir, dir) = temp_dir("oom");
    let f = write(&dir, "outer.mlir", OUTER_SUM);
    // Refused before launching: the signature says 40 GB of outputs.
    let o = tessera(&["run-mlir", &f]);
    assert_clean_error(&o, "40 GB output", "produces 40000000000 bytes of outputs");
    // `@main (` hides the signature from Tessera's reader: then the host copy refuses.
    let hidden = write(&dir, "hidden.mlir", &OUTER_SUM.replace("@main(", "@main ("));
    let o = tessera(&[
        "run-mlir",
        &hidden,
        "--input",
        "f32[100000,1]=1",
        "--input",
        "f32[1,100000]=2",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("allocating 40000000000 bytes on the host for f32[100000, 100000] failed")
            || err.contains("PJRT_"),
        "{err}"
    );
    let o = tessera(&[
        "run-mlir",
        &f,
        "--input",
        "f32[99999999999]=random",
        "--input",
        "f32[1,100000]",
    ]);
    assert_clean_error(&o, "400 GB input", "needs 1199999999988 bytes on the host");
    let o = tessera(&["run-mlir", &f, "--input", "f64[4294967296,4294967296]=0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o)); // clap's usage error
    assert!(
        stderr(&o).contains("overflows a 64-bit address"),
        "{}",
        stderr(&o)
    );
    let o = tessera(&["check", "add", "--shape", "1000000,1000000"]);
    assert_clean_error(&o, "check 1e12", "need 40000000000000 bytes on the host");
    let o = tessera(&["tune", "add", "--shape", "1000000,1000000"]);
    assert_clean_error(&o, "tune 1e12", "more than it can allocate");
}

#[test]
fn topologies_that_crash_libtpu_are_refused_first() {
    for (t, want) in [
        ("v5e:0x0", "every dim must be at least 1"),
        ("v6e:0x2", "every dim must be at least 1"),
        ("v5e:32x32", "at most 16 along each dim"),
        ("v5e:2x2x16", "the third dim must be 1"),
        ("tpu7x:99999999999x1", "at most 64 along each dim"),
    ] {
        let o = tessera(&["aot", "add", "--topology", t]);
        assert_clean_error(&o, t, want);
        assert!(
            stdout(&o).is_empty(),
            "{t}: header printed before the error"
        );
    }
}

#[test]
fn a_truncated_plugin_is_refused_not_a_sigbus() {
    let (_dir, dir) = temp_dir("trunc");
    let mut head = vec![0u8; 1 << 20];
    std::io::Read::read_exact(&mut std::fs::File::open(cpu_plugin()).unwrap(), &mut head).unwrap();
    let fake = dir.join("xla_cpu_pjrt.so");
    std::fs::write(&fake, head).unwrap();
    let env = [("TESSERA_PJRT_PLUGIN_CPU", Some(fake.to_str().unwrap()))];
    let o = tessera_env(&["devices"], &env, Duration::from_secs(60));
    assert!(o.status.success(), "{:?} {}", o.status, stderr(&o));
    let cpu = stdout(&o)
        .lines()
        .find(|l| l.starts_with("cpu "))
        .map(str::to_string)
        .unwrap_or_default();
    assert!(
        cpu.contains("unavailable") && cpu.contains("truncated"),
        "{cpu}"
    );
    let f = write(&dir, "neg.mlir", NEG);
    let o = tessera_env(&["run-mlir", &f], &env, Duration::from_secs(60));
    assert_clean_error(&o, "run-mlir", "the file is truncated or corrupt");
}

const NEG: &str = "module {\n  func.func public @main(%x: tensor<2xf32>) -> tensor<2xf32> {\n    %0 = stablehlo.negate %x : tensor<2xf32>\n    return %0 : tensor<2xf32>\n  }\n}\n";

#[test]
fn deep_nesting_and_unbounded_files_are_refused() {
    let (_dir, dir) = temp_dir("files");
    let deep = write(
        &dir,
        "deep.mlir",
        &("module {".repeat(5000) + &"}".repeat(5000)),
    );
    assert_clean_error(
        &tessera(&["run-mlir", &deep]),
        "5000 modules",
        "more than the 256 levels",
    );
    let dense = format!(
        "module {{ func.func public @main() -> tensor<i32> {{ %0 = stablehlo.constant dense<{}1{}> : tensor<i32>\n return %0 : tensor<i32> }} }}",
        "[".repeat(20000),
        "]".repeat(20000)
    );
    let dense = write(&dir, "dense.mlir", &dense);
    assert_clean_error(
        &tessera(&["run-mlir", &dense]),
        "20000 [",
        "more than the 256 levels",
    );
    for args in [
        vec!["run-mlir", "/dev/zero"],
        vec!["ops", "coverage", "--sweep", "/dev/zero"],
    ] {
        assert_clean_error(&tessera(&args), &args.join(" "), "not a regular file");
    }
    let d = dir.to_str().unwrap();
    assert_clean_error(
        &tessera(&["run-mlir", d]),
        "a directory",
        "a directory, not a regular file",
    );
}

#[test]
fn tensor_types_of_2_pow_63_bytes_are_refused_before_xla_throws() {
    // XLA throws a C++ exception through the C API on these: the process aborted.
    let (_dir, dir) = temp_dir("types");
    let module = |ty: &str| {
        format!(
            "module {{\n func.func public @main() -> tensor<{ty}> {{\n %0 = stablehlo.iota dim = 0 : tensor<{ty}>\n return %0 : tensor<{ty}>\n }}\n}}\n"
        )
    };
    for ty in [
        "4294967296x4294967296xf32",
        "2305843009213693952xf32",
        "99999999999x99999999999xi8",
    ] {
        let f = write(&dir, "big.mlir", &module(ty));
        assert_clean_error(&tessera(&["run-mlir", &f]), ty, "of 2^63 bytes or more");
    }
    // One element less than 2^63 bytes: the plugin compiles it, the launch is refused.
    let ty = "2305843009213693951xf32";
    let f = write(&dir, "edge.mlir", &module(ty));
    assert_clean_error(
        &tessera(&["run-mlir", &f]),
        ty,
        "more than the host can allocate",
    );
}

#[test]
fn libtpu_given_as_the_cpu_plugin_is_refused_at_once() {
    let Ok(libtpu) = tessera::runtime::plugin_store::locate(tessera::runtime::DeviceKind::Tpu)
    else {
        return; // no libtpu installed here
    };
    let (_dir, dir) = temp_dir("libtpu");
    let f = write(&dir, "neg.mlir", NEG);
    let env = [
        ("TESSERA_PJRT_PLUGIN_CPU", Some(libtpu.to_str().unwrap())),
        ("TPU_SKIP_MDS_QUERY", None), // the user's env lacks it: Tessera must not hang anyway
    ];
    let start = Instant::now();
    let o = tessera_env(&["run-mlir", &f], &env, Duration::from_secs(90));
    assert_clean_error(
        &o,
        "libtpu as cpu",
        "is libtpu, the TPU plugin, not a cpu plugin",
    );
    println!("refused in {:?}", start.elapsed());
}

#[test]
fn out_of_range_input_values_are_errors_naming_value_and_dtype() {
    let (_dir, dir) = temp_dir("range");
    let f = write(
        &dir,
        "id8.mlir",
        "module {\n  func.func public @main(%x: tensor<4xi8>) -> tensor<4xi8> {\n    return %x : tensor<4xi8>\n  }\n}\n",
    );
    for (spec, want) in [
        ("i8[4]=300", "300 is out of range for i8 (-128 to 127)"),
        ("i8[4]=1.5", "1.5 is not an integer, as i8 needs"),
        ("i8[4]=1,2,3,-200", "-200 is out of range for i8"),
    ] {
        let o = tessera(&["run-mlir", &f, "--input", spec]);
        assert_eq!(o.status.code(), Some(2), "{spec}: {}", stderr(&o));
        assert!(stderr(&o).contains(want), "{spec}: {}", stderr(&o));
    }
    let o = tessera(&["run-mlir", &f, "--input", "i8[4]=-128,127,0,1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("output 0: i8[4] = [-128, 127, 0, 1]"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn plugin_log_lines_are_quiet_by_default_and_shown_with_verbose() {
    let absl = |s: &str| {
        s.lines()
            .filter(|l| {
                let b = l.as_bytes();
                b.len() > 5 && b"IWEF".contains(&b[0]) && b[1..5].iter().all(u8::is_ascii_digit)
            })
            .count()
    };
    let unset = [("TF_CPP_MIN_LOG_LEVEL", None)];
    let o = tessera_env(&["check", "add"], &unset, Duration::from_secs(120));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(absl(&stderr(&o)), 0, "{}", stderr(&o));
    let o = tessera_env(
        &["check", "add", "--verbose"],
        &unset,
        Duration::from_secs(120),
    );
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        absl(&stderr(&o)) > 0,
        "--verbose shows the plugin's lines: {}",
        stderr(&o)
    );
}

#[test]
fn devices_shows_the_sha256_of_the_loaded_plugin() {
    let o = tessera(&["devices"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("cpu "))
        .expect("cpu line");
    let shown = lines[at + 1]
        .trim()
        .strip_prefix("sha256 ")
        .unwrap_or_else(|| panic!("no sha256 line after the cpu line: {text}"));
    // Marked against the pinned wheel's plugin (a TESSERA_PJRT_PLUGIN_CPU of another
    // version is legal, so either mark).
    let shown = shown
        .strip_suffix(" (the pinned plugin)")
        .or_else(|| shown.strip_suffix(" (not the pinned plugin)"))
        .unwrap_or_else(|| panic!("no pinned/not pinned mark: {shown}"));
    // An independent oracle: coreutils' sha256sum of the same file.
    let path = lines[at].split_whitespace().last().unwrap();
    let Ok(sum) = Command::new("sha256sum").arg(path).output() else {
        return;
    };
    let want = String::from_utf8_lossy(&sum.stdout);
    assert_eq!(shown, want.split_whitespace().next().unwrap());
}

#[test]
fn plugin_install_refuses_a_wheel_whose_hash_is_not_pinned() {
    let (_dir, dir) = temp_dir("wheel");
    let wheel = dir.join("xla_cpu_pjrt-0.0.1-py3-none-manylinux_2_27_x86_64.whl");
    std::fs::write(&wheel, b"PK\x05\x06 not the real wheel").unwrap();
    let (_cache, cache) = temp_dir("wheel-cache");
    let env = [("TESSERA_CACHE_DIR", Some(cache.to_str().unwrap()))];
    let o = tessera_env(
        &[
            "plugin",
            "install",
            "cpu",
            "--wheel",
            wheel.to_str().unwrap(),
        ],
        &env,
        Duration::from_secs(60),
    );
    assert_clean_error(&o, "tampered wheel", "sha256 mismatch");
    assert!(stderr(&o).contains("55837b6b7b47daa717f2d9a5a03563ea0ceaa338d06a81a1e2d3f060d960decc"));
    let o = tessera_env(
        &["plugin", "install", "cpu", "--wheel", "/dev/zero"],
        &env,
        Duration::from_secs(60),
    );
    assert_clean_error(&o, "/dev/zero wheel", "is not a wheel file");
    assert!(
        !cache.join("plugins/cpu/xla_cpu_pjrt.so").exists(),
        "nothing unpacked"
    );
}

/// `tune` on an isolated cache folder (the plugin found through its env var).
fn tune_in(cache: &Path, extra: &[&str]) -> Output {
    let plugin = cpu_plugin();
    let env = [
        ("TESSERA_CACHE_DIR", Some(cache.to_str().unwrap())),
        ("TESSERA_PJRT_PLUGIN_CPU", Some(plugin.to_str().unwrap())),
    ];
    let args = [
        &[
            "tune", "softmax", "--shape", "64,256", "--budget", "2", "--json",
        ][..],
        extra,
    ]
    .concat();
    tessera_env(&args, &env, Duration::from_secs(300))
}

#[test]
fn tune_says_when_it_cannot_write_its_cache() {
    // Running as root ignores permissions: a file where the `autotune` folder belongs makes
    // the folder just as unwritable.
    let (_cache, cache) = temp_dir("tune-ro");
    std::fs::write(cache.join("autotune"), "not a folder").unwrap();
    let o = tune_in(&cache, &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("warning: the result was not cached"), "{err}");
    assert!(err.contains("writing the autotune cache under"), "{err}");
}

#[test]
fn a_cached_config_outside_the_space_is_tuned_again() {
    let (_cache, cache) = temp_dir("tune-bad");
    let first = tune_in(&cache, &[]);
    assert!(first.status.success(), "{}", stderr(&first));
    let files: Vec<PathBuf> = std::fs::read_dir(cache.join("autotune"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let mut entry: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    let best = entry["best_config"].as_str().unwrap().to_string();
    // Valid JSON, a parsable config, but a block size of 0: not in the space.
    let zeroed: Vec<String> = best
        .split(',')
        .map(|kv| format!("{}=0", kv.split_once('=').unwrap().0))
        .collect();
    entry["best_config"] = zeroed.join(",").into();
    std::fs::write(&files[0], entry.to_string()).unwrap();
    let second = tune_in(&cache, &[]);
    assert!(second.status.success(), "{}", stderr(&second));
    let json: serde_json::Value = serde_json::from_str(stdout(&second).trim()).unwrap();
    assert_eq!(json["cache_hit"], false, "{json}");
    assert!(json["evaluated"].as_u64().unwrap() > 0, "{json}");
    assert!(
        !json["best_config"].as_str().unwrap().contains("=0"),
        "{json}"
    );
    // The re-tune replaced the bad file: the next run is a hit again.
    let third = tune_in(&cache, &[]);
    let json: serde_json::Value = serde_json::from_str(stdout(&third).trim()).unwrap();
    assert_eq!(json["cache_hit"], true, "{json}");
}
