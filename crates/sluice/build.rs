//! Names the commit `sluice --version` prints: `SLUICE_BUILD_COMMIT` when set (an image
//! build, which has no `.git`), else `git rev-parse --short HEAD`, else `unknown`.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SLUICE_BUILD_COMMIT");
    let commit = std::env::var("SLUICE_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .or_else(from_git)
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=SLUICE_BUILD_COMMIT={commit}");
}

/// The checked-out commit, short; `None` without git or outside a repository. Asks to be
/// run again when HEAD moves (a commit, a checkout).
fn from_git() -> Option<String> {
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])?];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.extend(git(&["rev-parse", "--git-path", &branch]));
    }
    watched.extend(git(&["rev-parse", "--git-path", "packed-refs"]));
    // A path that does not exist would make the script run on every build.
    for path in watched.iter().filter(|p| std::path::Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
    Some(commit)
}

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?.trim().to_owned();
    (output.status.success() && !text.is_empty()).then_some(text)
}
