//! Every `bake` subcommand's help describes that subcommand: `bake --help`
//! lists each with its own line, and `bake SUB --help` starts with it.

use std::process::{Command, Output};

/// Every subcommand, with words its one-line description must contain
/// (case-insensitive) and that tell it apart from the others.
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    ("mesh", &["glTF mesh", "particles"]),
    ("scene", &["scene", "baked folder"]),
    ("watch", &["re-bake", "whenever", "changes"]),
    ("table", &["bake", "neighbour-overlap table"]),
    ("validate-table", &["check", "table", "exact counts"]),
    ("inspect", &["print", ".pellet"]),
];

fn bake(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bake"))
        .args(args)
        .output()
        .expect("run bake")
}

/// The standard output of a run that must succeed.
fn stdout_of(args: &[&str]) -> String {
    let out = bake(args);
    assert!(
        out.status.success(),
        "bake {}: {:?}\n{}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 help")
}

/// The `Commands:` section of `bake --help`: (name, description) in order,
/// clap's own `help` left out.
fn listed_subcommands() -> Vec<(String, String)> {
    let help = stdout_of(&["--help"]);
    let section = help
        .split_once("\nCommands:\n")
        .unwrap_or_else(|| panic!("no Commands: section in\n{help}"))
        .1;
    section
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let l = l.trim();
            let (name, description) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            (name.to_owned(), description.trim().to_owned())
        })
        .filter(|(name, _)| name != "help")
        .collect()
}

fn assert_describes(name: &str, text: &str, keywords: &[&str]) {
    let lower = text.to_lowercase();
    for k in keywords {
        assert!(
            lower.contains(&k.to_lowercase()),
            "`{name}`'s description {text:?} does not say {k:?}"
        );
    }
}

#[test]
fn bake_help_lists_every_subcommand_with_its_own_line() {
    let listed = listed_subcommands();
    let names: Vec<&str> = listed.iter().map(|(n, _)| n.as_str()).collect();
    let expected: Vec<&str> = SUBCOMMANDS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, expected, "the subcommands `bake --help` lists");
    for ((name, description), (_, keywords)) in listed.iter().zip(SUBCOMMANDS) {
        assert!(!description.is_empty(), "`{name}` has no description");
        assert_describes(name, description, keywords);
    }
    for (i, (a, da)) in listed.iter().enumerate() {
        for (b, db) in &listed[i + 1..] {
            assert_ne!(da, db, "`{a}` and `{b}` share a description");
        }
    }
}

#[test]
fn every_subcommand_help_starts_with_its_own_description() {
    let listed = listed_subcommands();
    for (name, keywords) in SUBCOMMANDS {
        let listed_line = &listed
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("`{name}` is not in `bake --help`"))
            .1;
        for flag in ["--help", "-h"] {
            let help = stdout_of(&[name, flag]);
            let first = help.lines().next().unwrap_or_default();
            assert_describes(name, first, keywords);
            assert!(
                first.starts_with(listed_line.as_str()),
                "`bake {name} {flag}` starts with {first:?}, `bake --help` lists {listed_line:?}"
            );
            assert!(
                help.contains(&format!("Usage: bake {name}")),
                "`bake {name} {flag}`:\n{help}"
            );
            // No other subcommand's text leaked into this one's help.
            for (other, other_line) in &listed {
                if other != name {
                    assert!(
                        !help.contains(other_line.as_str()),
                        "`bake {name} {flag}` carries `{other}`'s text {other_line:?}:\n{help}"
                    );
                }
            }
        }
        // `bake help SUB` is the same as `bake SUB --help`.
        assert_eq!(
            stdout_of(&["help", name]),
            stdout_of(&[name, "--help"]),
            "bake help {name}"
        );
    }
}
