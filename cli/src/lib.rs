//! # pellet-cli
//!
//! What `bake` and `player` share as command lines, written once: the
//! start of `main` ([`start`]: Mesa's noisy layer off, logging to stderr),
//! its end ([`finish`]: one line `bake: ...` and exit 1, a broken pipe is
//! success), clap parsers for values the libraries know without knowing clap
//! ([`gpu_backend_parser`], [`parse_bytes`]) and a terminal-only spinner.

use std::io::IsTerminal;
use std::process::ExitCode;

use pellet_gpu::BackendChoice;

/// Mesa's device-select Vulkan layer prints `XDG_RUNTIME_DIR is invalid or
/// not set` on headless machines; Pellet picks its adapter itself, so the
/// layer is turned off unless the user set `NODEVICE_SELECT` already.
/// Call first thing in `main`, before any thread exists.
#[allow(unsafe_code)]
pub fn quiet_device_select() {
    if std::env::var_os("NODEVICE_SELECT").is_none() {
        // SAFETY: called at the start of `main`, before any thread is
        // spawned, so nothing reads the environment concurrently.
        unsafe { std::env::set_var("NODEVICE_SELECT", "1") };
    }
}

/// Logs to stderr: warnings by default, then info, debug and trace for each
/// `-v`; colours only on a terminal.
pub fn init_logging(verbose: u8) {
    let level = match verbose {
        0 => tracing::Level::WARN,
        1 => tracing::Level::INFO,
        2 => tracing::Level::DEBUG,
        _ => tracing::Level::TRACE,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .init();
}

/// The start of a binary's `main`, before it parses its arguments.
pub fn start() {
    quiet_device_select();
    keep_freed_memory();
}

/// Keeps the memory the program frees for its next allocations instead of
/// handing it back to the kernel (glibc on Linux: no `mmap` for large
/// blocks, no trimming of the heap). The neighbour search and the
/// simulation free and allocate arrays of hundreds of megabytes phase after
/// phase; a page the kernel hands out again must be faulted in and zeroed,
/// which on the virtual machines we measure on runs at about 1 GB/s and
/// varies several-fold from run to run (`player nns` on 10 M points, runs
/// alternating: 1.6-1.9 s with this against 2.2-3.0 s without; docs/nns.md
/// gives the command). The price: the process keeps its
/// peak heap until it exits. `PELLET_RETURN_MEMORY=1` in the environment
/// keeps glibc's default. Call first thing in `main`, before any thread
/// exists.
#[allow(unsafe_code)]
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("PELLET_RETURN_MEMORY").is_none_or(|v| v.is_empty() || v == "0") {
        // SAFETY: `mallopt` only sets glibc's allocation policy (documented
        // values: `M_MMAP_MAX` 0 turns `mmap` for large requests off,
        // `M_TRIM_THRESHOLD` -1 turns trimming off); it is called before
        // any thread allocates.
        unsafe {
            libc::mallopt(libc::M_MMAP_MAX, 0);
            libc::mallopt(libc::M_TRIM_THRESHOLD, -1);
        }
    }
}

/// The end of a binary's `main`: a failure is one line `PROG: error: cause`
/// on stderr and exit 1; a broken pipe (`bake inspect ... | head`) is success.
pub fn finish(program: &str, result: anyhow::Result<ExitCode>) -> ExitCode {
    match result {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("{program}: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether `err` was caused by writing to a closed pipe.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `auto`, `vulkan` or `gl`, listed in `--help` (the GPU crate knows no clap).
pub fn gpu_backend_parser() -> impl clap::builder::TypedValueParser<Value = BackendChoice> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(BackendChoice::NAMES)
        .try_map(|s| s.parse::<BackendChoice>())
}

/// A size in bytes: `1GiB`, `256MiB`, `500MB`, `4096`.
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "kib" | "k" => 1 << 10,
        "mib" | "m" => 1 << 20,
        "gib" | "g" => 1 << 30,
        _ => {
            return Err(format!(
                "{s:?}: unknown unit (use B, KiB, MiB, GiB, KB, MB or GB)"
            ));
        }
    };
    match number.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v * (factor as f64) < 1.8e19 => {
            Ok((v * factor as f64) as u64)
        }
        _ => Err(format!("{s:?} is not a positive size such as 1GiB")),
    }
}

/// A spinner with the elapsed time on stderr, hidden when stderr is not a
/// terminal (scripts and tests see nothing).
pub fn spinner(message: String) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new_spinner().with_message(message);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert_eq!(parse_bytes("1.5 MiB"), Ok(3 << 19));
        assert_eq!(parse_bytes("500MB"), Ok(500_000_000));
        assert!(parse_bytes("-1MiB").is_err());
        assert!(parse_bytes("1 parsec").is_err());
        assert!(parse_bytes("1e30GiB").is_err());
    }

    #[test]
    fn broken_pipes_are_recognised_through_context() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let err = anyhow::Error::new(pipe).context("writing the table");
        assert!(is_broken_pipe(&err));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
