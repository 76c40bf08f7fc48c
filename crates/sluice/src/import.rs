//! `sluice import`: writes a sluice configuration from another gateway's. The translation
//! is pure ([`litellm`]); here the files and what is said on standard error.

pub mod litellm;

use std::path::PathBuf;

use anyhow::Context as _;

/// What `sluice import` reads.
#[derive(Debug, clap::Subcommand)]
pub enum ImportCommand {
    /// A LiteLLM proxy config (YAML): providers, deployments, model groups as pools,
    /// routing strategy and fallbacks; names on standard error what it could not translate.
    Litellm(LitellmArgs),
}

/// Options of `sluice import litellm`.
#[derive(Debug, clap::Args)]
pub struct LitellmArgs {
    /// The LiteLLM config file (config.yaml).
    pub config: PathBuf,
    /// Where to write the sluice config; standard output when left out.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// Runs `sluice import`.
///
/// # Errors
/// When the file cannot be read or written, or holds nothing sluice can serve.
pub fn run(command: ImportCommand) -> anyhow::Result<()> {
    let ImportCommand::Litellm(args) = command;
    let yaml =
        std::fs::read_to_string(&args.config).with_context(|| format!("cannot read {}", args.config.display()))?;
    let source =
        args.config.file_name().map_or_else(|| args.config.display().to_string(), |n| n.to_string_lossy().into_owned());
    let translation = litellm::translate(&yaml, &source)?;
    // The translation is checked as `sluice check-config` would: a failure is a bug here.
    if let Err(error) = sluice_config::parse(&translation.toml) {
        anyhow::bail!("the translated config does not validate (please report it): {error}");
    }
    match &args.output {
        Some(path) => {
            std::fs::write(path, &translation.toml).with_context(|| format!("cannot write {}", path.display()))?;
        }
        None => crate::write_line(translation.toml.trim_end()),
    }
    say(&translation, args.output.as_deref());
    Ok(())
}

/// What the operator must do next, on standard error.
#[expect(clippy::print_stderr, reason = "the command's own report")]
fn say(translation: &litellm::Translation, output: Option<&std::path::Path>) {
    if let Some(path) = output {
        eprintln!("wrote {}", path.display());
    }
    if !translation.env.is_empty() {
        eprintln!("set before `sluice serve`:");
        for (var, what) in &translation.env {
            eprintln!("  {var}: {what}");
        }
    }
    if !translation.untranslated.is_empty() {
        eprintln!("not translated ({}):", translation.untranslated.len());
        for note in &translation.untranslated {
            eprintln!("  - {note}");
        }
    }
}
