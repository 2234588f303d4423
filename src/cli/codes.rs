//! `rein codes [--json]`: the failure codes `auto-retry` knows, in its three groups (on by default,
//! opt in, never retried), as a settings page renders its switches
//! (`rein_plugins::auto_retry::CATALOGUE`; see `docs/runtime-semantics.md`, "auto-retry").
//!
//! The text form is for a person choosing `retryableCodes`; `--json` prints the catalogue as the
//! library serializes it, for a page or a script.

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use rein::plugins::auto_retry::catalogue::{CATALOGUE, Catalogue, Retried};

/// Output and exit status, for `--help`.
pub(crate) const CODES_HELP: &str = "\
Output:
  stdout   the three groups of auto-retry's codes, each code with what it means: on by default,
           opt in, never retried (the hard floor). With --json, the catalogue as one JSON object
           on one line: {\"groups\": [{\"group\", \"title\", \"retried\", \"codes\": [{\"code\",
           \"description\"}]}]}.
  stderr   nothing, unless stdout cannot be written.

Exit status:
  0  the catalogue was printed
  1  stdout could not be written
  2  a usage error";

/// Arguments of `rein codes`.
#[derive(Debug, clap::Args)]
pub(crate) struct CodesArgs {
    /// Print the catalogue as one JSON object on stdout.
    #[arg(long)]
    json: bool,
}

/// Runs `rein codes`.
pub(crate) fn run(args: &CodesArgs) -> ExitCode {
    let out = if args.json {
        match serde_json::to_string(&CATALOGUE) {
            Ok(json) => json + "\n",
            Err(e) => {
                eprintln!("error: cannot serialize the catalogue: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        text(&CATALOGUE)
    };
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(out.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(1),
    }
}

/// The catalogue as a person reads it.
fn text(catalogue: &Catalogue) -> String {
    let width = catalogue.groups.iter().flat_map(|g| g.codes).map(|c| c.code.len()).max();
    let width = width.unwrap_or(0);
    let mut out = String::from("auto-retry's failure codes (its retryableCodes setting)\n");
    for group in &catalogue.groups {
        let how = match group.retried {
            Retried::ByDefault => "retried unless removed from retryableCodes",
            Retried::WhenListed => "retried only when added to retryableCodes",
            Retried::Never => "the hard floor: listing them has no effect",
        };
        let _ = writeln!(out, "\n{} ({how}):", group.title);
        for info in group.codes {
            let _ = writeln!(out, "  {:width$}  {}", info.code, info.description);
        }
    }
    out.push_str("\nAny other code an adapter produces (HTTP_418, HTTP_404) may be listed too.\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_shown_under_its_group_with_its_description() {
        let text = text(&CATALOGUE);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "auto-retry's failure codes (its retryableCodes setting)");
        assert_eq!(
            lines[2], "On by default (retried unless removed from retryableCodes):",
            "{text}"
        );
        assert!(text.contains("\n  PI_AI_ERROR              the pi-ai adapter's catch-all\n"));
        assert!(text.contains("\nOpt in (retried only when added to retryableCodes):\n  QUOTA "));
        assert!(
            text.contains("\nNever retried (the hard floor: listing them has no effect):\n  AUTH ")
        );
        for group in &CATALOGUE.groups {
            for info in group.codes {
                assert_eq!(
                    lines.iter().filter(|l| l.trim_start().starts_with(info.code)).count(),
                    1,
                    "{}",
                    info.code
                );
            }
        }
    }
}
