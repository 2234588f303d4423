//! [`PgCluster`]: a throwaway PostgreSQL cluster for tests.
//!
//! `PgCluster::start()` runs `initdb` in a new temporary directory and `pg_ctl start` on a free
//! loopback port (its unix socket in the same directory), as the `postgres` user when the tests
//! run as root (PostgreSQL refuses to run as root) and as the current user otherwise. Dropping the
//! cluster stops the server (`pg_ctl stop -m immediate`) and removes the directory. Nothing
//! outside the temporary directory is touched; no systemd, no service.
//!
//! The superuser is `rein` with the password [`PASSWORD`]: over TCP the server asks for it
//! (`scram-sha-256`), over the unix socket it trusts (for the fixture's own `createdb`).
//!
//! # When PostgreSQL is missing
//!
//! The binaries are looked for in `$REIN_PG_BIN`, then `/usr/lib/postgresql/<newest>/bin`, then
//! the `PATH`. Without them, [`PgCluster::start`] returns `None` after printing how to install
//! PostgreSQL, so the test skips — except in CI (`CI=true`), where a missing server is a failure:
//! the tests that need PostgreSQL must run there (`.ci/install-deps` installs it).

use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The password of the cluster's superuser `rein`.
pub const PASSWORD: &str = "rein-test-secret";

/// The superuser.
pub const USER: &str = "rein";

/// A running throwaway cluster; dropping it stops the server and removes its directory.
#[derive(Debug)]
pub struct PgCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// `Some(uid:gid)` of `postgres` when the server runs as that user (we are root).
    run_as: Option<(u32, u32)>,
}

impl PgCluster {
    /// Starts a cluster, or `None` (after saying how to install PostgreSQL) when PostgreSQL is not
    /// installed and this is not CI. Panics when starting fails, or when it is missing in CI.
    pub fn start() -> Option<Self> {
        let Some(bin) = find_bin() else {
            let how = "PostgreSQL is not installed: the PostgreSQL tests are skipped. Install it \
                       with `.ci/install-deps` (Debian: `apt-get install postgresql`), or point \
                       REIN_PG_BIN at the directory holding initdb and pg_ctl.";
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true: {how}");
            }
            eprintln!("{how}");
            return None;
        };
        Some(Self::start_with(bin))
    }

    fn start_with(bin: PathBuf) -> Self {
        let dir = tempfile::Builder::new().prefix("rein-pg-").tempdir().expect("a temporary dir");
        let run_as = if is_root() { Some(postgres_ids()) } else { None };
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown the dir");
        }
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).expect("write the password file");
        if let Some((uid, gid)) = run_as {
            std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid)).expect("chown the pw file");
        }
        let mut cluster = Self { dir, bin, port: 0, run_as };
        let data = cluster.data();
        cluster.run_checked(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                USER.as_ref(),
                "--auth-local=trust".as_ref(),
                "--auth-host=scram-sha-256".as_ref(),
                "--pwfile".as_ref(),
                pwfile.as_os_str(),
                "--no-sync".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
            ],
        );
        cluster.port = free_port();
        cluster.pg_ctl_start();
        cluster
    }

    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://rein:PASSWORD@127.0.0.1:PORT/DB`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{db}", self.port)
    }

    /// `postgres://rein@127.0.0.1:PORT/DB`: the password must come from `PGPASSWORD`.
    pub fn url_without_password(&self, db: &str) -> String {
        format!("postgres://{USER}@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates database `name` and returns its [`PgCluster::url`].
    pub fn create_database(&self, name: &str) -> String {
        let socket = self.dir.path().to_path_buf();
        let port = self.port.to_string();
        let args: [&std::ffi::OsStr; 8] = [
            "-h".as_ref(),
            socket.as_os_str(),
            "-p".as_ref(),
            port.as_ref(),
            "-U".as_ref(),
            USER.as_ref(),
            "--".as_ref(),
            name.as_ref(),
        ];
        self.run_checked("createdb", &args);
        self.url(name)
    }

    /// `pg_ctl restart -m immediate`: the server stops without a clean shutdown (as a crash
    /// would: what was not committed is lost, what was committed with synchronous commit is not)
    /// and starts again on the same port.
    pub fn restart_immediate(&self) {
        self.stop_immediate();
        self.pg_ctl_start();
    }

    /// A shell command that restarts the server the way [`PgCluster::restart_immediate`] does
    /// (`pg_ctl restart -m immediate`, waiting until it accepts connections, on the same port),
    /// for a program that restarts the database itself (`rein stress --pg-restart`).
    pub fn restart_command(&self) -> String {
        let quote = |path: &Path| format!("'{}'", path.display());
        let as_postgres = if self.run_as.is_some() { "runuser -u postgres -- " } else { "" };
        format!(
            "{as_postgres}{} restart -D {} -m immediate -w -t 60 -l {}",
            quote(&self.bin.join("pg_ctl")),
            quote(&self.data()),
            quote(&self.dir.path().join("server.log"))
        )
    }

    /// Stops the server at once (`pg_ctl stop -m immediate`).
    pub fn stop_immediate(&self) {
        let data = self.data();
        self.run_checked(
            "pg_ctl",
            &[
                "stop".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "-w".as_ref(),
            ],
        );
    }

    /// Starts the server again after [`PgCluster::stop_immediate`].
    pub fn start_again(&self) {
        self.pg_ctl_start();
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn pg_ctl_start(&self) {
        let data = self.data();
        let log = self.dir.path().join("server.log");
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
            self.port,
            self.dir.path().display()
        );
        self.run_checked(
            "pg_ctl",
            &[
                "start".as_ref(),
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-w".as_ref(),
                "-t".as_ref(),
                "60".as_ref(),
                "-o".as_ref(),
                options.as_ref(),
            ],
        );
    }

    /// Runs one of the server's programs (as `postgres` when we are root); panics with its output
    /// when it fails.
    fn run_checked(&self, program: &str, args: &[&std::ffi::OsStr]) {
        let path = self.bin.join(program);
        let mut command = match self.run_as {
            Some(_) => {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(&path);
                c
            }
            None => Command::new(&path),
        };
        command.args(args).current_dir(self.dir.path()).env_remove("PGPASSWORD");
        let output = command.output().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if !output.status.success() {
            let log =
                std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default();
            panic!("{program} failed: {}\nserver log:\n{log}", describe(&output));
        }
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        let data = self.data();
        let path = self.bin.join("pg_ctl");
        let mut command = match self.run_as {
            Some(_) => {
                let mut c = Command::new("runuser");
                c.args(["-u", "postgres", "--"]).arg(&path);
                c
            }
            None => Command::new(&path),
        };
        // A server already stopped makes this fail; either way it is down afterwards.
        let _ = command
            .args(["stop", "-m", "immediate", "-w", "-D"])
            .arg(&data)
            .current_dir(self.dir.path())
            .output();
    }
}

fn describe(output: &Output) -> String {
    format!(
        "{}\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The directory holding `initdb` and `pg_ctl`, if PostgreSQL is installed.
fn find_bin() -> Option<PathBuf> {
    let has = |dir: &Path| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file();
    if let Some(dir) = std::env::var_os("REIN_PG_BIN").map(PathBuf::from) {
        return has(&dir).then_some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            Some((version, entry.path().join("bin")))
        })
        .filter(|(_, bin)| has(bin))
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).find(|dir| has(dir))
}

fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The uid and gid of the `postgres` user (created by Debian's package).
fn postgres_ids() -> (u32, u32) {
    let id = |flag: &str| -> u32 {
        let output = Command::new("id").args([flag, "postgres"]).output().expect("run id");
        assert!(output.status.success(), "no `postgres` user: {}", describe(&output));
        String::from_utf8_lossy(&output.stdout).trim().parse().expect("a numeric id")
    };
    (id("-u"), id("-g"))
}

/// A loopback port nobody listens on right now.
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
    listener.local_addr().expect("its address").port()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_starts_creates_databases_restarts_and_leaves_nothing_behind() {
        let Some(cluster) = PgCluster::start() else { return };
        let url = cluster.create_database("one");
        assert!(url.ends_with(&format!("127.0.0.1:{}/one", cluster.port())), "{url}");
        cluster.restart_immediate();
        let restarted = Command::new("sh").args(["-c", &cluster.restart_command()]).status();
        assert!(restarted.unwrap().success(), "{}", cluster.restart_command());
        cluster.create_database("two"); // up again, on its port
        let dir = cluster.dir.path().to_path_buf();
        assert!(dir.join("data/postmaster.pid").exists());
        drop(cluster);
        assert!(!dir.exists(), "the directory is removed");
    }
}
