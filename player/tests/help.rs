//! Every `player` subcommand's `--help` describes that subcommand, and the
//! top-level help lists each with its own line.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_player"))
        .args(args)
        .env("NODEVICE_SELECT", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn every_subcommand_describes_itself() {
    let top = help(&["--help"]);
    for (sub, keyword) in [
        ("gpu", "GPU adapter"),
        ("info", "Load a scene and print"),
        ("nns", "neighbours within a radius"),
        ("run", "Simulate a scene"),
    ] {
        let line = top
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{sub} ")))
            .unwrap_or_else(|| panic!("{sub} missing from player --help:\n{top}"));
        assert!(line.contains(keyword), "{sub}: {line}");
        let own = help(&[sub, "--help"]);
        let first = own.lines().next().unwrap();
        assert!(
            first.contains(keyword),
            "player {sub} --help starts: {first}"
        );
        assert!(own.contains(&format!("Usage: player {sub}")), "{own}");
    }
    // Global flags are accepted after the subcommand too.
    assert!(help(&["run", "--help", "-v"]).contains("Usage: player run"));
}
