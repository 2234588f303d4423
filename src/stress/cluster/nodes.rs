//! The node processes of `rein stress --nodes`: `rein node` children of the same binary, each on
//! a free port of its own, started, signalled (`kill -9`, `SIGSTOP`, `SIGCONT`, `SIGTERM`) and
//! heard (their standard error, read back with `stderr::said`).
//!
//! Each start of a node is an *incarnation* (`n2.1`, `n2.2` after a restart); it connects to
//! the database under that name (`application_name`), which is how the run's audit of the
//! writes (`audit`) knows which incarnation wrote each event.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::stderr::{Loss, Said, said};

/// How many of its last lines of standard error a node's failure quotes.
const TAIL: usize = 30;

/// How long a node may take to listen.
const START_LIMIT: Duration = Duration::from_secs(60);

/// What a node's standard error said, over all its incarnations.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct Heard {
    /// Partitions taken.
    pub(crate) took: u64,
    /// Of those, taken over from a node whose lease had run out.
    pub(crate) taken_over: u64,
    /// Open turns resumed after taking partitions.
    pub(crate) resumed: u64,
    /// Partitions lost because another node took them.
    pub(crate) lost_taken_over: u64,
    /// Partitions lost because a lease went by without a renewal answering.
    pub(crate) lost_lease_ran_out: u64,
    /// Partitions lost because an append was refused by the fence.
    pub(crate) fenced: u64,
    /// Partitions given back.
    pub(crate) gave_back: u64,
    /// Rounds that could not reach the database.
    pub(crate) unreachable: u64,
    /// Its last lines.
    pub(crate) tail: VecDeque<String>,
}

impl Heard {
    fn hear(&mut self, node: &str, line: &str) {
        match said(node, line) {
            Said::Took { partitions, over } => {
                self.took += partitions;
                self.taken_over += over;
            }
            Said::Resumed { turns } => self.resumed += turns,
            Said::Lost { partitions, by: Loss::TakenOver } => self.lost_taken_over += partitions,
            Said::Lost { partitions, by: Loss::LeaseRanOut } => {
                self.lost_lease_ran_out += partitions;
            }
            Said::Lost { partitions, by: Loss::Fenced } => self.fenced += partitions,
            Said::GaveBack { partitions } => self.gave_back += partitions,
            Said::Unreachable => self.unreachable += 1,
            Said::Other => {}
        }
        if self.tail.len() == TAIL {
            self.tail.pop_front();
        }
        self.tail.push_back(line.to_owned());
    }

    /// Its last lines, one a line, indented.
    pub(crate) fn last_words(&self) -> String {
        self.tail.iter().map(|l| format!("\n    {l}")).collect()
    }
}

/// How to start a node.
#[derive(Debug, Clone)]
pub(crate) struct Spawn {
    /// The `rein` binary.
    pub(crate) exe: PathBuf,
    /// The database (as given: the password, if it holds one, never printed).
    pub(crate) url: String,
    /// The node's id.
    pub(crate) id: String,
    /// `--lease-ms`.
    pub(crate) lease_ms: u64,
    /// `--partitions`, when asked for.
    pub(crate) partitions: Option<u32>,
    /// The workload, as JSON (`--stress-workload`).
    pub(crate) workload: String,
}

/// One incarnation of a node: a running `rein node`.
pub(crate) struct Process {
    /// The node's id.
    pub(crate) id: String,
    /// Its incarnation, from 1.
    pub(crate) incarnation: u32,
    /// Its process id.
    pub(crate) pid: u32,
    /// Its API: `http://127.0.0.1:PORT`.
    pub(crate) addr: String,
    /// How it exited, once it did.
    exited: Arc<Mutex<Option<Exit>>>,
    exit: mpsc::Receiver<()>,
    /// Its standard input: the node drains and stops when it closes (with this process, however
    /// it ends).
    _stdin: Option<std::process::ChildStdin>,
}

impl Process {
    /// Starts incarnation `incarnation` of a node and waits until it listens; what it says on
    /// standard error goes to `heard`.
    pub(crate) fn start(
        spawn: &Spawn,
        incarnation: u32,
        heard: Arc<Mutex<Heard>>,
    ) -> Result<Self, String> {
        let writer = writer_name(&spawn.id, incarnation);
        let url = with_application_name(&spawn.url, &writer);
        let mut command = Command::new(&spawn.exe);
        command
            .args(["node", "--store", &url, "--node-id", &spawn.id, "--port", "0"])
            .args(["--lease-ms", &spawn.lease_ms.to_string()])
            .args(["--stress-workload", &spawn.workload]);
        if let Some(partitions) = spawn.partitions {
            command.args(["--partitions", &partitions.to_string()]);
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start node {writer} ({}): {e}", spawn.exe.display()))?;
        let pid = child.id();
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (listening, addr) = mpsc::channel();
        let banner = format!("rein node {}: ", spawn.id);
        if let Some(stdout) = stdout {
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some(url) = line.strip_prefix(&banner) {
                        let _ = listening.send(url.trim().trim_end_matches('/').to_owned());
                    }
                }
            });
        }
        if let Some(stderr) = stderr {
            let (id, heard) = (spawn.id.clone(), Arc::clone(&heard));
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    heard.lock().unwrap_or_else(PoisonError::into_inner).hear(&id, &line);
                }
            });
        }
        let exited = Arc::new(Mutex::new(None));
        let (ended, exit) = mpsc::channel();
        let slot = Arc::clone(&exited);
        std::thread::spawn(move || {
            let exit = match child.wait() {
                Ok(status) => Exit { clean: status.success(), status: status.to_string() },
                Err(e) => Exit { clean: false, status: format!("cannot be waited for: {e}") },
            };
            *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(exit);
            let _ = ended.send(());
        });
        let mut process = Self {
            id: spawn.id.clone(),
            incarnation,
            pid,
            addr: String::new(),
            exited,
            exit,
            _stdin: stdin,
        };
        let deadline = std::time::Instant::now() + START_LIMIT;
        loop {
            match addr.recv_timeout(Duration::from_millis(50)) {
                Ok(addr) => {
                    process.addr = addr;
                    return Ok(process);
                }
                Err(mpsc::RecvTimeoutError::Disconnected)
                | Err(mpsc::RecvTimeoutError::Timeout)
                    if process.exit_status().is_some() =>
                {
                    // Its last lines of stderr may still be on their way.
                    std::thread::sleep(Duration::from_millis(100));
                    let words = heard.lock().unwrap_or_else(PoisonError::into_inner).last_words();
                    let status = process.exit_status().map(|e| e.status).unwrap_or_default();
                    return Err(format!("node {writer} did not start: {status}{words}"));
                }
                Err(_) if std::time::Instant::now() >= deadline => {
                    process.kill();
                    return Err(format!(
                        "node {writer} did not listen within {} s",
                        START_LIMIT.as_secs()
                    ));
                }
                Err(_) => {}
            }
        }
    }

    /// The name it writes under: `ID.INCARNATION`.
    pub(crate) fn writer(&self) -> String {
        writer_name(&self.id, self.incarnation)
    }

    /// How it exited, once it did.
    pub(crate) fn exit_status(&self) -> Option<Exit> {
        self.exited.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Sends it `signal` (`KILL`, `STOP`, `CONT`, `TERM`).
    pub(crate) fn signal(&self, signal: &str) -> Result<(), String> {
        if self.exit_status().is_some() {
            return Err(format!("node {} has exited", self.writer()));
        }
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.pid.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("kill -{signal}: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("kill -{signal} {} failed: {status}", self.pid))
        }
    }

    /// `kill -9`, and waits until it is gone.
    pub(crate) fn kill(&mut self) {
        let _ = self.signal("KILL");
        self.wait(Duration::from_secs(10));
    }

    /// Waits at most `limit` for it to exit: how it exited, if it did.
    pub(crate) fn wait(&mut self, limit: Duration) -> Option<Exit> {
        if self.exit_status().is_none() {
            let _ = self.exit.recv_timeout(limit);
        }
        self.exit_status()
    }

    /// Its peak resident set size so far, KiB.
    pub(crate) fn peak_rss_kib(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        crate::stress::summary::peak_rss_kib(&status)
    }
}

/// How a node's process exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Exit {
    /// With status 0.
    pub(crate) clean: bool,
    /// Its status, in words (`exit status: 1`, `signal: 9 (SIGKILL)`).
    pub(crate) status: String,
}

/// The database name of a node's incarnation.
pub(crate) fn writer_name(id: &str, incarnation: u32) -> String {
    format!("{id}.{incarnation}")
}

/// `url` with `application_name=NAME` (the last one given wins).
fn with_application_name(url: &str, name: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}application_name={name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_connects_under_the_name_of_its_incarnation() {
        let cases = [
            (
                "postgres://rein@127.0.0.1:5432/db",
                "postgres://rein@127.0.0.1:5432/db?application_name=n1.2",
            ),
            (
                "postgres://rein@127.0.0.1/db?sslmode=disable",
                "postgres://rein@127.0.0.1/db?sslmode=disable&application_name=n1.2",
            ),
        ];
        for (url, want) in cases {
            assert_eq!(with_application_name(url, &writer_name("n1", 2)), want);
        }
    }

    #[test]
    fn what_a_node_says_is_counted_and_its_last_lines_kept() {
        let mut heard = Heard::default();
        for line in [
            "rein node n1: http://127.0.0.1:1/",
            "rein node n1: took 8 partitions",
            "rein node n1: took 3 partitions (3 taken over from n2)",
            "rein node n1: resumed 2 turns",
            "rein node n1: lost 1 partition (fenced); stopped 1 session(s)",
            "rein node n1: lost 2 partitions (lease ran out); stopped 0 session(s)",
            "rein node n1: lost 4 partitions (taken over); stopped 0 session(s)",
            "rein node n1: gave back 4 partitions; stopped 0 session(s)",
            "rein node n1: database unreachable: no answer within a third of the lease",
        ] {
            heard.hear("n1", line);
        }
        let counted = Heard { tail: VecDeque::new(), ..heard.clone() };
        assert_eq!(
            counted,
            Heard {
                took: 11,
                taken_over: 3,
                resumed: 2,
                lost_taken_over: 4,
                lost_lease_ran_out: 2,
                fenced: 1,
                gave_back: 4,
                unreachable: 1,
                tail: VecDeque::new(),
            }
        );
        for i in 0..TAIL + 5 {
            heard.hear("n1", &format!("line {i}"));
        }
        assert_eq!(heard.tail.len(), TAIL);
        assert!(heard.last_words().ends_with(&format!("line {}", TAIL + 4)));
    }
}
